"""Make small real documents (PDF, DOCX, PPTX, XLSX) for tests, without extra dependencies."""

from __future__ import annotations

import io
import zipfile


def make_pdf(lines: list[str]) -> bytes:
    """A valid one-page PDF with each line as text (Helvetica)."""

    def esc(s: str) -> str:
        return s.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")

    ops = ["BT", "/F1 12 Tf", "72 720 Td", "14 TL"]
    for line in lines:
        ops.append(f"({esc(line)}) Tj T*")
    ops.append("ET")
    stream = "\n".join(ops).encode("latin-1")
    objs = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
        b"/Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length " + str(len(stream)).encode() + b" >>\nstream\n" + stream + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    out = io.BytesIO()
    out.write(b"%PDF-1.4\n")
    offsets = []
    for i, body in enumerate(objs, 1):
        offsets.append(out.tell())
        out.write(f"{i} 0 obj\n".encode() + body + b"\nendobj\n")
    xref = out.tell()
    out.write(f"xref\n0 {len(objs) + 1}\n0000000000 65535 f \n".encode())
    for off in offsets:
        out.write(f"{off:010d} 00000 n \n".encode())
    out.write(
        f"trailer\n<< /Size {len(objs) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()
    )
    return out.getvalue()


def make_docx(paragraphs: list[str]) -> bytes:
    """A minimal valid DOCX with the given paragraphs."""
    body = "".join(f'<w:p><w:r><w:t xml:space="preserve">{p}</w:t></w:r></w:p>' for p in paragraphs)
    files = {
        "[Content_Types].xml": (
            '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>'
            '<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">'
            '<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.'
            'relationships+xml"/><Default Extension="xml" ContentType="application/xml"/>'
            '<Override PartName="/word/document.xml" ContentType="application/vnd.openxmlformats-'
            'officedocument.wordprocessingml.document.main+xml"/></Types>'
        ),
        "_rels/.rels": (
            '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>'
            '<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">'
            '<Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/'
            'relationships/officeDocument" Target="word/document.xml"/></Relationships>'
        ),
        "word/document.xml": (
            '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>'
            '<w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main">'
            f"<w:body>{body}</w:body></w:document>"
        ),
    }
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for name, content in files.items():
            z.writestr(name, content)
    return buf.getvalue()


def _zipped(files: dict[str, str]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for name, content in files.items():
            z.writestr(name, content)
    return buf.getvalue()


_XML = '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>'
_REL = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
_PKG = "http://schemas.openxmlformats.org/package/2006/relationships"
_TYPES = "http://schemas.openxmlformats.org/package/2006/content-types"
_OOXML = "application/vnd.openxmlformats-officedocument"


def _types(overrides: dict[str, str]) -> str:
    return (
        _XML + f'<Types xmlns="{_TYPES}"><Default Extension="rels" ContentType="application/'
        'vnd.openxmlformats-package.relationships+xml"/><Default Extension="xml" '
        'ContentType="application/xml"/>'
        + "".join(f'<Override PartName="{p}" ContentType="{t}"/>' for p, t in overrides.items())
        + "</Types>"
    )


def _rels(targets: dict[str, tuple[str, str]]) -> str:
    return (
        _XML
        + f'<Relationships xmlns="{_PKG}">'
        + "".join(
            f'<Relationship Id="{rid}" Type="{_REL}/{kind}" Target="{target}"/>'
            for rid, (kind, target) in targets.items()
        )
        + "</Relationships>"
    )


def make_xlsx(rows: list[list[str]]) -> bytes:
    """A minimal valid XLSX: one sheet of these rows (inline strings)."""
    main = "http://schemas.openxmlformats.org/spreadsheetml/2006/main"
    data = "".join(
        f'<row r="{i}">'
        + "".join(
            f'<c r="{chr(65 + j)}{i}" t="inlineStr"><is><t>{v}</t></is></c>'
            for j, v in enumerate(row)
        )
        + "</row>"
        for i, row in enumerate(rows, 1)
    )
    return _zipped(
        {
            "[Content_Types].xml": _types(
                {
                    "/xl/workbook.xml": f"{_OOXML}.spreadsheetml.sheet.main+xml",
                    "/xl/worksheets/sheet1.xml": f"{_OOXML}.spreadsheetml.worksheet+xml",
                }
            ),
            "_rels/.rels": _rels({"rId1": ("officeDocument", "xl/workbook.xml")}),
            "xl/workbook.xml": _XML + f'<workbook xmlns="{main}" xmlns:r="{_REL}"><sheets>'
            '<sheet name="Sheet1" sheetId="1" r:id="rId1"/></sheets></workbook>',
            "xl/_rels/workbook.xml.rels": _rels({"rId1": ("worksheet", "worksheets/sheet1.xml")}),
            "xl/worksheets/sheet1.xml": _XML
            + f'<worksheet xmlns="{main}"><sheetData>{data}</sheetData></worksheet>',
        }
    )


def make_pptx(slides: list[str]) -> bytes:
    """A minimal valid PPTX: one slide per text."""
    p = "http://schemas.openxmlformats.org/presentationml/2006/main"
    a = "http://schemas.openxmlformats.org/drawingml/2006/main"
    n = range(1, len(slides) + 1)
    files = {
        "[Content_Types].xml": _types(
            {"/ppt/presentation.xml": f"{_OOXML}.presentationml.presentation.main+xml"}
            | {f"/ppt/slides/slide{i}.xml": f"{_OOXML}.presentationml.slide+xml" for i in n}
        ),
        "_rels/.rels": _rels({"rId1": ("officeDocument", "ppt/presentation.xml")}),
        "ppt/presentation.xml": _XML
        + f'<p:presentation xmlns:p="{p}" xmlns:r="{_REL}"><p:sldIdLst>'
        + "".join(f'<p:sldId id="{255 + i}" r:id="rId{i}"/>' for i in n)
        + "</p:sldIdLst></p:presentation>",
        "ppt/_rels/presentation.xml.rels": _rels(
            {f"rId{i}": ("slide", f"slides/slide{i}.xml") for i in n}
        ),
    }
    for i, text in zip(n, slides, strict=True):
        files[f"ppt/slides/slide{i}.xml"] = (
            _XML + f'<p:sld xmlns:p="{p}" xmlns:a="{a}"><p:cSld><p:spTree><p:sp><p:txBody>'
            f"<a:p><a:r><a:t>{text}</a:t></a:r></a:p></p:txBody></p:sp></p:spTree></p:cSld>"
            "</p:sld>"
        )
    return _zipped(files)


def make_png(text: str) -> bytes:
    """A PNG image showing `text` in large dark letters (for OCR)."""
    from PIL import Image, ImageDraw, ImageFont

    img = Image.new("RGB", (60 + 24 * len(text), 160), "white")
    draw = ImageDraw.Draw(img)
    try:
        font = ImageFont.truetype("DejaVuSans.ttf", 40)
    except OSError:
        font = ImageFont.load_default(size=40)
    draw.text((30, 50), text, fill="black", font=font)
    buf = io.BytesIO()
    img.save(buf, "PNG")
    return buf.getvalue()
