"""Turn a collected file into normalized text: markdown/text as-is, the rest via kreuzberg."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import BadInput

TEXT_SUFFIXES = {
    ".md",
    ".markdown",
    ".mdown",
    ".txt",
    ".text",
    ".rst",
    ".org",
    ".adoc",
    ".csv",
    ".tsv",
    ".log",
    ".json",
    ".yaml",
    ".yml",
    ".toml",
    ".ini",
    ".cfg",
    ".py",
    ".js",
    ".ts",
    ".tsx",
    ".jsx",
    ".go",
    ".rs",
    ".java",
    ".c",
    ".h",
    ".cpp",
    ".hpp",
    ".cs",
    ".rb",
    ".php",
    ".sh",
    ".bash",
    ".zsh",
    ".sql",
    ".r",
    ".jl",
    ".kt",
    ".swift",
    ".scala",
    ".lua",
    ".pl",
    ".tex",
    ".bib",
    ".srt",
    ".vtt",
}
KREUZBERG_MIME = {
    ".pdf": "application/pdf",
    ".html": "text/html",
    ".htm": "text/html",
    ".xhtml": "application/xhtml+xml",
    ".docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    ".pptx": "application/vnd.openxmlformats-officedocument.presentationml.presentation",
    ".xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
    ".odt": "application/vnd.oasis.opendocument.text",
    ".epub": "application/epub+zip",
    ".rtf": "application/rtf",
    ".eml": "message/rfc822",
}
MARKDOWN_LIKE = {".md", ".markdown", ".mdown"}
IMAGE_MIME = {
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".tif": "image/tiff",
    ".tiff": "image/tiff",
    ".bmp": "image/bmp",
    ".webp": "image/webp",
    ".gif": "image/gif",
}
OCR_HINT = "install tesseract (Debian: apt-get install tesseract-ocr-eng)"


@dataclass
class Extracted:
    text: str
    media_type: str
    title: str = ""
    meta: dict[str, Any] = field(default_factory=dict)


def supported(path: Path, ocr: bool = False) -> bool:
    s = path.suffix.lower()
    return s in TEXT_SUFFIXES or s in KREUZBERG_MIME or (ocr and s in IMAGE_MIME)


def ocr_available() -> bool:
    import shutil

    return shutil.which("tesseract") is not None


def require_ocr() -> None:
    """Fail before any work when OCR was asked for but cannot run."""
    if not ocr_available():
        raise BadInput("OCR was asked for, but tesseract is not installed", OCR_HINT)


def normalize_text(text: str) -> str:
    """Canonical form for `.ok.md`: LF newlines, no BOM, no trailing spaces, one final newline."""
    text = text.replace("\r\n", "\n").replace("\r", "\n").lstrip("\ufeff")
    text = "\n".join(line.rstrip() for line in text.split("\n"))
    text = re.sub(r"\n{4,}", "\n\n\n", text).strip("\n")
    return text + "\n" if text else ""


_FRONT = re.compile(r"\A---[ \t]*\n(.*?\n)?---[ \t]*(?:\n|\Z)", re.S)


def frontmatter(text: str) -> tuple[dict[str, Any], int]:
    """A leading YAML block (`---` lines around a mapping) and where the body after it
    starts; `({}, 0)` when the text has none, or the block is not a YAML mapping.

    The block stays in the normalized file (the doc id is the hash of the whole text, and
    spans point into it); only the chunks, and so the index, leave it out.
    """
    m = _FRONT.match(text)
    if not m:
        return {}, 0
    import yaml

    try:
        meta = yaml.safe_load(m.group(1) or "")
    except yaml.YAMLError:
        return {}, 0
    if not isinstance(meta, dict):
        return {}, 0
    return meta, m.end()


def _tags(value: Any) -> list[str]:
    if isinstance(value, str):
        value = re.split(r"[,\s]+", value)
    if not isinstance(value, list):
        return []
    return [str(v).strip() for v in value if str(v).strip()]


TITLE_CHARS = 80
_FIRST_SENTENCE = re.compile(r"(.+?[.!?])(?=\s|$)")


def title_from_line(line: str) -> str:
    """A title from a document's first line: its first sentence when that fits in
    `TITLE_CHARS` (without a closing full stop), else the line when it fits, else the line
    cut at the last word boundary that fits, with "…"."""
    line = " ".join(line.split())
    m = _FIRST_SENTENCE.match(line)
    if m and len(m.group(1)) <= TITLE_CHARS:
        sentence = m.group(1)
        return sentence[:-1] if sentence.endswith(".") and not sentence.endswith("..") else sentence
    if len(line) <= TITLE_CHARS:
        return line
    cut = line[: TITLE_CHARS - 1]
    space = cut.rfind(" ")
    if space >= TITLE_CHARS // 2:
        cut = cut[:space]
    return cut.rstrip(" ,;:-") + "…"


def title_of(text: str, fallback: str = "") -> str:
    meta, body = frontmatter(text)
    named = meta.get("title")
    if isinstance(named, str | int | float) and str(named).strip():
        return str(named).strip()
    text = text[body:]
    for line in text.splitlines()[:50]:
        m = re.match(r"^#{1,3}\s+(.+?)\s*#*\s*$", line)
        if m:
            return m.group(1).strip()
    for line in text.splitlines():
        if line.strip():
            return title_from_line(line)
    return fallback


SNIFF_BYTES = 8192


def _looks_binary(data: bytes) -> bool:
    return b"\x00" in data[:SNIFF_BYTES]


def looks_like_text(head: bytes) -> bool:
    """Whether a file's first bytes read as text: no NUL byte and valid UTF-8 (a character
    cut off at the end of `head` is fine)."""
    import codecs

    if _looks_binary(head):
        return False
    try:
        codecs.getincrementaldecoder("utf-8")().decode(head[:SNIFF_BYTES], final=False)
    except UnicodeDecodeError:
        return False
    return True


def extract_bytes(data: bytes, name: str, where: str | None = None, ocr: bool = False) -> Extracted:
    """Extract text from the bytes of a file called `name`; `BadInput` with the reason if not.

    OCR (tesseract, through kreuzberg) runs only when `ocr` is set: for images, and for the
    pages of a PDF that have no text layer.
    """
    where = where or name
    suffix = Path(name).suffix.lower()
    if not data.strip():
        raise BadInput(f"{where}: empty file, nothing to index", "add content or leave it out")
    if suffix in KREUZBERG_MIME:
        return _kreuzberg(data, KREUZBERG_MIME[suffix], name, where, ocr)
    if suffix in IMAGE_MIME:
        if not ocr:
            raise BadInput(
                f"{where}: an image; its text can only be read with OCR",
                "pass --ocr (needs tesseract)",
            )
        require_ocr()
        return _kreuzberg(data, IMAGE_MIME[suffix], name, where, ocr)
    if suffix and suffix not in TEXT_SUFFIXES and _looks_binary(data):
        raise BadInput(
            f"{where}: unsupported binary file type '{suffix}'",
            "supported: text, markdown, " + ", ".join(sorted(KREUZBERG_MIME)),
        )
    if _looks_binary(data):
        raise BadInput(
            f"{where}: binary content in a text file",
            "pass text, markdown or a document type kreuzberg reads",
        )
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise BadInput(
            f"{where}: not valid UTF-8 (bad byte at offset {e.start})",
            "convert it first, e.g. `iconv -f latin1 -t utf-8`",
        ) from e
    text = normalize_text(text)
    if not text.strip():
        raise BadInput(f"{where}: only whitespace, nothing to index", "add content or leave it out")
    media = "text/markdown" if suffix in MARKDOWN_LIKE or not suffix else "text/plain"
    tags = _tags(frontmatter(text)[0].get("tags"))
    return Extracted(
        text=text,
        media_type=media,
        title=title_of(text, Path(name).stem),
        meta={"tags": tags} if tags else {},
    )


_META_LINE = re.compile(r"^\s*(?:#+\s*)?[\w-]+:\s.*$|^\s*$")


def _drop_head_block(text: str) -> str:
    """Drop the `---` block of <head> metadata that kreuzberg puts before html→markdown output.

    The metadata (title, description) is kept in the mapping entry instead.
    """
    lines = text.split("\n")
    if not lines or lines[0].strip() != "---":
        return text
    i = 1
    while i < len(lines) and _META_LINE.match(lines[i]) and lines[i].strip() != "---":
        i += 1
    if i < len(lines) and lines[i].strip() == "---":
        i += 1
    return "\n".join(lines[i:])


def _kreuzberg(data: bytes, mime: str, name: str, where: str, ocr: bool = False) -> Extracted:
    try:
        from kreuzberg import ExtractionConfig, OcrConfig, extract_bytes_sync
    except ImportError as e:  # pragma: no cover - kreuzberg is a hard dependency
        raise BadInput(f"{where}: kreuzberg is not installed", "uv sync") from e
    fmt = "markdown" if mime in ("text/html", "application/xhtml+xml") else "plain"
    opts: dict[str, Any] = (
        {"ocr": OcrConfig(backend="tesseract", language="eng")} if ocr else {"disable_ocr": True}
    )
    try:
        res = extract_bytes_sync(
            data, mime, config=ExtractionConfig(use_cache=False, output_format=fmt, **opts)
        )
    except Exception as e:  # kreuzberg raises its own error family
        first = (str(e).splitlines() or ["unreadable"])[0][:200]
        raise BadInput(
            f"{where}: cannot extract text ({first})", "check the file opens in its own application"
        ) from e
    text = res.content or ""
    meta = dict(res.metadata or {})
    title = str(meta.get("title") or "").strip()
    text = _drop_head_block(text)
    text = normalize_text(text)
    if not text.strip():
        raise BadInput(
            f"{where}: no text could be extracted",
            "a scanned document needs OCR: pass --ocr"
            if not ocr
            else "the OCR found no text either",
        )
    keep = {
        k: v
        for k, v in meta.items()
        if k in ("title", "authors", "page_count", "created_at", "language", "subject")
        and isinstance(v, str | int | float | list)
    }
    return Extracted(
        text=text, media_type=mime, title=title or title_of(text, Path(name).stem), meta=keep
    )
