"""Local stand-ins for the network: a small web site, an arXiv API with PDFs, a git repository.

Everything listens on 127.0.0.1 with a port the OS picks, runs in a thread, and stops when
the test's fixture ends. Tests change the served content between fetches.
"""

from __future__ import annotations

import hashlib
import socket
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit


@dataclass
class Page:
    body: bytes
    content_type: str = "text/html; charset=utf-8"
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    etag: bool = True  # answer If-None-Match with 304
    chunked: bool = False  # stream without Content-Length


class Site:
    """A mutable set of pages served over HTTP; `hits` counts requests and 304s per path."""

    def __init__(self) -> None:
        self.pages: dict[str, Page] = {}
        self.hits: dict[str, int] = {}
        self.not_modified: dict[str, int] = {}
        self.server: ThreadingHTTPServer | None = None
        self.feed: ArxivFeed | None = None

    @property
    def base(self) -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def url(self, path: str) -> str:
        return self.base + path

    def html(self, path: str, title: str, body: str, nav: str = "") -> None:
        self.pages[path] = Page(
            f"<!doctype html><html><head><title>{title}</title></head><body>"
            f"<nav>{nav}</nav><main>{body}</main><footer>Site footer text</footer>"
            "</body></html>".encode()
        )

    def handler(self) -> type[BaseHTTPRequestHandler]:
        site = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:  # keep test output quiet
                pass

            def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
                path = urlsplit(self.path).path
                site.hits[path] = site.hits.get(path, 0) + 1
                if site.feed is not None and path == "/api/query":
                    page = site.feed.answer(parse_qs(urlsplit(self.path).query))
                else:
                    page = site.pages.get(path)
                if page is None:
                    page = Page(b"<html><body>no such page</body></html>", status=404)
                tag = '"' + hashlib.sha256(page.body).hexdigest()[:16] + '"'
                modified = page.headers.get("Last-Modified")
                if page.status == 200 and (
                    (page.etag and self.headers.get("If-None-Match") == tag)
                    or (modified and self.headers.get("If-Modified-Since") == modified)
                ):
                    site.not_modified[path] = site.not_modified.get(path, 0) + 1
                    self.send_response(304)
                    self.send_header("ETag", tag)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                self.send_response(page.status)
                self.send_header("Content-Type", page.content_type)
                if page.status == 200 and page.etag:
                    self.send_header("ETag", tag)
                for k, v in page.headers.items():
                    self.send_header(k, v)
                if page.chunked:
                    self.send_header("Transfer-Encoding", "chunked")
                    self.end_headers()
                    for i in range(0, len(page.body), 65536):
                        block = page.body[i : i + 65536]
                        self.wfile.write(f"{len(block):x}\r\n".encode() + block + b"\r\n")
                    self.wfile.write(b"0\r\n\r\n")
                    return
                self.send_header("Content-Length", str(len(page.body)))
                self.end_headers()
                self.wfile.write(page.body)

        return Handler


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: object, client_address: object) -> None:
        pass  # a client hanging up early (size cap) is expected here, not worth a traceback


@contextmanager
def serve(site: Site) -> Iterator[Site]:
    site.server = _Server(("127.0.0.1", 0), site.handler())
    t = threading.Thread(target=site.server.serve_forever, daemon=True)
    t.start()
    try:
        yield site
    finally:
        site.server.shutdown()
        site.server.server_close()


def free_port() -> int:
    """A port nothing listens on (for 'connection refused')."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# -- PDF ---------------------------------------------------------------------------------------
def make_pdf(lines: list[str]) -> bytes:
    """A minimal, valid one-page PDF with the lines as real text (Helvetica)."""

    def esc(s: str) -> str:
        return s.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")

    content = (
        "BT /F1 12 Tf 72 720 Td 16 TL " + " ".join(f"({esc(line)}) Tj T*" for line in lines) + " ET"
    )
    objs = [
        "<< /Type /Catalog /Pages 2 0 R >>",
        "<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
        "/Resources << /Font << /F1 5 0 R >> >> >>",
        f"<< /Length {len(content)} >>\nstream\n{content}\nendstream",
        "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>",
    ]
    out = b"%PDF-1.4\n"
    offsets = []
    for i, o in enumerate(objs, 1):
        offsets.append(len(out))
        out += f"{i} 0 obj\n{o}\nendobj\n".encode("latin-1")
    xref = len(out)
    out += (
        f"xref\n0 {len(objs) + 1}\n0000000000 65535 f \n"
        + "".join(f"{o:010d} 00000 n \n" for o in offsets)
    ).encode()
    out += (
        f"trailer\n<< /Size {len(objs) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n"
    ).encode()
    return out


# -- arXiv ---------------------------------------------------------------------------------------
@dataclass
class Paper:
    base: str
    version: int
    title: str
    authors: list[str]
    abstract: str
    lines: list[str]
    updated: str = "2024-01-02T00:00:00Z"


class ArxivFeed:
    """Answers the arXiv API's `id_list` queries with an Atom feed; PDFs live on the site."""

    def __init__(self, site: Site) -> None:
        self.site = site
        self.papers: dict[str, Paper] = {}  # the latest version of each
        self.versions: dict[str, Paper] = {}  # every version published, by "<base>v<n>"
        site.feed = self

    def publish(self, paper: Paper) -> None:
        self.papers[paper.base] = paper
        self.versions[f"{paper.base}v{paper.version}"] = paper
        vid = f"{paper.base}v{paper.version}"
        self.site.pages[f"/pdf/{vid}"] = Page(make_pdf(paper.lines), "application/pdf")

    def answer(self, query: dict[str, list[str]]) -> Page:
        ids = [i for i in (query.get("id_list") or [""])[0].split(",") if i]
        entries = []
        for i in ids:
            base = i.split("v")[0] if "v" in i.split(".")[-1] else i
            # like arXiv: a versioned id answers with that version, a bare one with the latest
            p = self.versions.get(i) if base != i else self.papers.get(base)
            if p is None:
                continue
            vid = f"{p.base}v{p.version}"
            authors = "".join(f"<author><name>{a}</name></author>" for a in p.authors)
            entries.append(
                f"<entry><id>http://arxiv.org/abs/{vid}</id><updated>{p.updated}</updated>"
                f"<published>2024-01-01T00:00:00Z</published><title>{p.title}</title>"
                f"<summary>{p.abstract}</summary>{authors}"
                f'<link href="http://arxiv.org/abs/{vid}" rel="alternate" type="text/html"/>'
                f'<link title="pdf" href="{self.site.url("/pdf/" + vid)}" rel="related" '
                'type="application/pdf"/>'
                '<arxiv:primary_category term="cs.IR"/><category term="cs.IR"/></entry>'
            )
        feed = (
            '<?xml version="1.0" encoding="UTF-8"?>'
            '<feed xmlns="http://www.w3.org/2005/Atom" '
            'xmlns:opensearch="http://a9.com/-/spec/opensearch/1.1/" '
            'xmlns:arxiv="http://arxiv.org/schemas/atom">'
            f"<opensearch:totalResults>{len(entries)}</opensearch:totalResults>"
            "<opensearch:startIndex>0</opensearch:startIndex>"
            f"<opensearch:itemsPerPage>{len(entries)}</opensearch:itemsPerPage>"
            + "".join(entries)
            + "</feed>"
        )
        return Page(feed.encode(), "application/atom+xml", etag=False)


# -- git -------------------------------------------------------------------------------------------
def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        [
            "git",
            "-c",
            "user.name=Test",
            "-c",
            "user.email=test@example.org",
            "-c",
            "init.defaultBranch=main",
            *args,
        ],
        cwd=repo,
        check=True,
        capture_output=True,
        text=True,
    ).stdout


def make_repo(path: Path, files: dict[str, str]) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "-q")
    write_files(path, files)
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "initial")
    return path


def write_files(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
