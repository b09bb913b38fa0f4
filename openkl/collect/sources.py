"""Sources beyond local files: web pages, arXiv papers and code repositories.

Each fetcher turns what it collected into `store.Candidate`s; nothing is written until the
whole fetch succeeded, so a failed fetch leaves the folder untouched. `ingest_batch` then
stores the candidates (under the writer lock, like any ingest) and records on each mapping
entry where it came from (`source`), when (`fetched_at`) and what the next refresh needs to
ask for (`fetch`: ETag/Last-Modified, arXiv version, repository commit).

Network access happens only here, and only when the user asked for it.
"""

from __future__ import annotations

import fnmatch
import hashlib
import os
import re
import subprocess
import time
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from typing import Any, cast
from urllib.parse import urljoin, urlsplit, urlunsplit

from .. import settings
from ..errors import BadInput, NotFound, OkError
from ..files import mapping as mapping_mod
from ..files.folder import Folder, iso
from ..records import (
    ArxivMeta,
    FetchInfo,
    MappingEntry,
    RefreshPolicy,
    Skipped,
    Source,
    Unchanged,
)
from ..text.normalize import supported
from . import store

USER_AGENT = "openkl/0.1 (+local-first knowledge folder; ok store web)"
HTML_TYPES = {"text/html", "application/xhtml+xml"}
TEXT_TYPES = {"text/plain": ".txt", "text/markdown": ".md", "text/x-markdown": ".md"}
PDF_TYPES = {"application/pdf"}
ARXIV_ID = re.compile(
    r"^(?:arxiv:)?(\d{4}\.\d{4,5}|[a-z][a-z.-]*(?:\.[A-Z]{2})?/\d{7})(v\d+)?$", re.I
)


class FetchError(OkError):
    """A source could not be fetched (unreachable, refused, wrong type, too big…)."""


class Disallowed(FetchError):
    """The site's robots.txt asks not to fetch the page: a page a crawl passes over, as it
    passes over a link to another host, rather than one that failed."""


@dataclass
class Fetched:
    url: str  # the URL asked for
    final_url: str  # after redirects
    status: int
    content_type: str = ""
    data: bytes = b""
    etag: str | None = None
    last_modified: str | None = None

    @property
    def not_modified(self) -> bool:
        return self.status == 304


@dataclass
class Batch:
    """What a fetch produced: candidates to ingest, and what to record per candidate."""

    cands: list[store.Candidate] = field(default_factory=list)
    fetch: dict[str, FetchInfo] = field(default_factory=dict)  # origin -> entry["fetch"]
    skipped: list[Skipped] = field(default_factory=list)
    tree: Path | None = None  # a repository's working tree, when the batch came from one
    # origin -> the refresh policy of a document new to the folder (an object that appeared
    # under an S3 prefix takes the policy of the prefix's other documents)
    policies: dict[str, RefreshPolicy] = field(default_factory=dict)
    # documents already stored whose source did not change (an S3 object of the same
    # ETag), not read again: reported as unchanged, their fetch details recorded anew
    kept: list[tuple[Unchanged, Source]] = field(default_factory=list)


# -- HTTP ---------------------------------------------------------------------------------
class WebClient:
    """A polite HTTP client: robots.txt, a per-host delay, a size cap, bounded redirects."""

    def __init__(
        self,
        folder: Folder | None = None,
        *,
        delay: float | None = None,
        timeout: float | None = None,
        max_bytes: int | None = None,
        max_redirects: int | None = None,
    ) -> None:
        import httpx

        def opt(name: str, given: Any) -> Any:
            if given is not None:
                return given
            return folder.setting(name) if folder is not None else settings.default(name)

        self.delay = float(opt("web.delay", delay))
        self.timeout = float(opt("web.timeout", timeout))
        self.max_bytes = int(
            max_bytes if max_bytes is not None else opt("web.max_mb", None) * 1024 * 1024
        )
        self.client = httpx.Client(
            follow_redirects=True,
            max_redirects=int(opt("web.max_redirects", max_redirects)),
            timeout=self.timeout,
            headers={"User-Agent": USER_AGENT},
        )
        self._robots: dict[str, Any] = {}
        self._last: dict[str, float] = {}

    def __enter__(self) -> WebClient:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.client.close()

    # robots.txt ---------------------------------------------------------------
    def _robots_for(self, url: str) -> Any:
        from urllib.robotparser import RobotFileParser

        parts = urlsplit(url)
        origin = f"{parts.scheme}://{parts.netloc}"
        if origin in self._robots:
            return self._robots[origin]
        rp = RobotFileParser(origin + "/robots.txt")
        try:
            f = self._get(origin + "/robots.txt", robots=False, accept_any=True, quiet=True)
        except FetchError:
            f = None
        # as urllib.robotparser reads it: a missing robots.txt allows everything, a refused
        # or failing one allows nothing
        if f is None or (400 <= f.status < 500 and f.status not in (401, 403)):
            rp.parse([])
        elif f.status in (401, 403) or f.status >= 500:
            rp.parse(["User-agent: *", "Disallow: /"])
        else:
            rp.parse(f.data.decode("utf-8", errors="replace").splitlines())
        self._robots[origin] = rp
        return rp

    def allowed(self, url: str) -> bool:
        return bool(self._robots_for(url).can_fetch(USER_AGENT, url))

    def _wait_turn(self, url: str) -> None:
        host = urlsplit(url).netloc
        delay = self.delay
        rp = self._robots.get(f"{urlsplit(url).scheme}://{host}")
        if rp is not None:
            crawl_delay = rp.crawl_delay(USER_AGENT)
            if crawl_delay:
                delay = max(delay, float(crawl_delay))
        last = self._last.get(host)
        if last is not None and delay > 0:
            wait = last + delay - time.monotonic()
            if wait > 0:
                time.sleep(wait)
        self._last[host] = time.monotonic()

    # fetching ---------------------------------------------------------------------
    def get(
        self,
        url: str,
        *,
        etag: str | None = None,
        last_modified: str | None = None,
        robots: bool = True,
    ) -> Fetched:
        """GET `url`; `FetchError` for anything but a usable 200 (or a 304 when conditional)."""
        return self._get(url, etag=etag, last_modified=last_modified, robots=robots)

    def _get(
        self,
        url: str,
        *,
        etag: str | None = None,
        last_modified: str | None = None,
        robots: bool = True,
        accept_any: bool = False,
        quiet: bool = False,
    ) -> Fetched:
        import httpx

        check_url(url)
        if robots and not self.allowed(url):
            raise Disallowed(
                f"{url} is disallowed by the site's robots.txt",
                "respecting robots.txt; fetch another page",
            )
        headers = {}
        if etag:
            headers["If-None-Match"] = etag
        if last_modified:
            headers["If-Modified-Since"] = last_modified
        self._wait_turn(url)
        try:
            with self.client.stream("GET", url, headers=headers) as r:
                ctype = r.headers.get("content-type", "").split(";")[0].strip().lower()
                out = Fetched(
                    url=url,
                    final_url=str(r.url),
                    status=r.status_code,
                    content_type=ctype,
                    etag=r.headers.get("etag"),
                    last_modified=r.headers.get("last-modified"),
                )
                if accept_any and r.status_code != 200:
                    return out
                if r.status_code == 304 and (etag or last_modified):
                    return out
                if r.status_code >= 400:
                    kind = "server error" if r.status_code >= 500 else "not available"
                    raise FetchError(
                        f"{url}: {kind} (HTTP {r.status_code} {r.reason_phrase or ''})".replace(
                            " )", ")"
                        ),
                        "check the address, or try again later"
                        if r.status_code >= 500
                        else "check the address",
                    )
                if r.status_code != 200:
                    raise FetchError(
                        f"{url}: unexpected HTTP {r.status_code}",
                        "only plain 200 responses can be stored",
                    )
                declared = r.headers.get("content-length")
                if declared and declared.isdigit() and int(declared) > self.max_bytes:
                    raise FetchError(
                        f"{url}: {int(declared) >> 10} KiB is over the size cap of "
                        f"{self.max_bytes >> 10} KiB",
                        "raise web.max_mb",
                    )
                chunks, size = [], 0
                for block in r.iter_bytes():
                    size += len(block)
                    if size > self.max_bytes:
                        raise FetchError(
                            f"{url}: larger than the size cap of {self.max_bytes >> 10} KiB",
                            "raise web.max_mb",
                        )
                    chunks.append(block)
                out.data = b"".join(chunks)
                return out
        except FetchError:
            raise
        except httpx.TooManyRedirects as e:
            raise FetchError(
                f"{url}: too many redirects (a redirect loop?)",
                "open the address in a browser to see where it leads",
            ) from e
        except httpx.TimeoutException as e:
            raise FetchError(
                f"{url}: no answer within {self.timeout:g} s",
                "try again later, or raise web.timeout",
            ) from e
        except httpx.ConnectError as e:
            raise FetchError(
                f"cannot reach {urlsplit(url).netloc}: {_first_line(e) or 'connection failed'}",
                "check the address and your network",
            ) from e
        except (httpx.UnsupportedProtocol, httpx.InvalidURL) as e:
            raise BadInput(
                f"{url} is not a usable URL: {_first_line(e)}",
                "pass an http:// or https:// address",
            ) from e
        except httpx.HTTPError as e:
            raise FetchError(
                f"{url}: {_first_line(e) or type(e).__name__}", "try again later"
            ) from e


def _first_line(e: BaseException) -> str:
    return (str(e).splitlines() or [""])[0][:200]


def check_url(url: str) -> str:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise BadInput(f"{url!r} is not an http(s) URL", "pass e.g. https://example.org/page")
    return url


def canonical_url(url: str) -> str:
    """The URL without its fragment, with a path (`/` for the bare host)."""
    p = urlsplit(url.strip())
    return urlunsplit((p.scheme.lower(), p.netloc.lower(), p.path or "/", p.query, ""))


# -- HTML: main content and links -----------------------------------------------------------
_SKIP_TAGS = {
    "script",
    "style",
    "nav",
    "header",
    "footer",
    "aside",
    "form",
    "noscript",
    "template",
    "svg",
    "iframe",
    "button",
    "select",
}
_VOID = {
    "area",
    "base",
    "br",
    "col",
    "embed",
    "hr",
    "img",
    "input",
    "link",
    "meta",
    "source",
    "track",
    "wbr",
}


class _Scan(HTMLParser):
    """One pass: links, the title, and whether a <main>/<article> region exists."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.links: list[str] = []
        self.title = ""
        self.regions: set[str] = set()
        self._in_title = False
        self.base: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "a" and a.get("href"):
            self.links.append(a["href"] or "")
        elif tag == "base" and a.get("href") and self.base is None:
            self.base = a["href"]
        elif tag == "title":
            self._in_title = True
        elif tag in ("main", "article"):
            self.regions.add(tag)
        elif a.get("role") == "main":
            self.regions.add("role=main")

    def handle_endtag(self, tag: str) -> None:
        if tag == "title":
            self._in_title = False

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.title += data


class _MainContent(HTMLParser):
    """Re-serialize the page keeping only its main region, without navigation and scripts."""

    def __init__(self, region: str | None) -> None:
        super().__init__(convert_charrefs=False)
        self.region = region
        self.out: list[str] = []
        self._skip: list[str] = []
        self._inside = 0 if region else 1
        self._region_tags: list[str] = []

    def _is_region(self, tag: str, attrs: list[tuple[str, str | None]]) -> bool:
        if self.region == "role=main":
            return dict(attrs).get("role") == "main"
        return tag == self.region

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if self._skip:
            if tag not in _VOID:
                self._skip.append(tag)
            return
        if tag in _SKIP_TAGS:
            self._skip.append(tag)
            return
        if self.region and not self._region_tags and self._is_region(tag, attrs):
            self._region_tags.append(tag)
            self._inside = 1
        elif self._region_tags and tag == self._region_tags[0] and tag not in _VOID:
            self._region_tags.append(tag)
        if self._inside:
            self.out.append(self.get_starttag_text() or "")

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if not self._skip and self._inside and tag not in _SKIP_TAGS:
            self.out.append(self.get_starttag_text() or "")

    def handle_endtag(self, tag: str) -> None:
        if self._skip:
            if tag == self._skip[-1]:
                self._skip.pop()
            return
        if self._inside:
            self.out.append(f"</{tag}>")
        if self._region_tags and tag == self._region_tags[0]:
            self._region_tags.pop()
            if not self._region_tags:
                self._inside = 0
                self.region = "done"  # only the first main region

    def handle_data(self, data: str) -> None:
        if not self._skip and self._inside:
            self.out.append(data)

    def handle_entityref(self, name: str) -> None:
        self.handle_data(f"&{name};")

    def handle_charref(self, name: str) -> None:
        self.handle_data(f"&#{name};")


def _charset(data: bytes) -> str:
    m = re.search(rb"<meta[^>]+charset=[\"']?([\w-]+)", data[:4096], re.I)
    return m.group(1).decode("ascii", "ignore") if m else "utf-8"


def parse_html(data: bytes, base_url: str) -> tuple[str, str, list[str]]:
    """(main-content HTML, title, absolute links) of a page."""
    try:
        html = data.decode(_charset(data), errors="replace")
    except LookupError:
        html = data.decode("utf-8", errors="replace")
    scan = _Scan()
    scan.feed(html)
    scan.close()
    region = next((r for r in ("main", "article", "role=main") if r in scan.regions), None)
    body = _MainContent(region)
    body.feed(html)
    body.close()
    title = " ".join(scan.title.split())
    base = urljoin(base_url, scan.base) if scan.base else base_url
    links = []
    for href in scan.links:
        href = href.strip()
        if not href or href.startswith(("#", "mailto:", "javascript:", "tel:", "data:")):
            continue
        absolute = urljoin(base, href)
        if urlsplit(absolute).scheme in ("http", "https"):
            links.append(canonical_url(absolute))
    head = f"<html><head><title>{_escape(title)}</title></head><body>" if title else "<html><body>"
    return head + "".join(body.out) + "</body></html>", title, list(dict.fromkeys(links))


def _escape(s: str) -> str:
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _safe_segment(s: str) -> str:
    s = re.sub(r"[^\w.\-]+", "_", s, flags=re.A).strip("._") or "_"
    return s[:100]


def web_rel(url: str, content_type: str) -> str:
    """Where a fetched URL's original goes under `store/sources/` (stable for a URL)."""
    p = urlsplit(url)
    host = _safe_segment((p.hostname or "host") + (f"_{p.port}" if p.port else ""))
    path = p.path or "/"
    if path.endswith("/"):
        path += "index"
    segs = [_safe_segment(s) for s in path.split("/") if s not in ("", ".", "..")] or ["index"]
    name = (
        re.sub(
            r"\.(html?|xhtml|php\d?|aspx?|jsp|cgi|txt|md|markdown|pdf)$", "", segs[-1], flags=re.I
        )
        or "index"
    )
    if p.query:
        name += "__" + hashlib.sha256(p.query.encode()).hexdigest()[:8]
    ext = (
        ".html"
        if content_type in HTML_TYPES
        else ".pdf"
        if content_type in PDF_TYPES
        else TEXT_TYPES.get(content_type, ".txt")
    )
    return "/".join(["web", host, *segs[:-1], name + ext])


def page_candidate(f: Fetched) -> tuple[store.Candidate, list[str]]:
    """The candidate for a fetched page, and the links found on it."""
    ctype = f.content_type
    if ctype not in HTML_TYPES and ctype not in TEXT_TYPES and ctype not in PDF_TYPES:
        raise FetchError(
            f"{f.url}: content type {ctype or 'unknown'!r} is not a page openkl can store",
            "web pages (HTML), plain text, markdown and PDF are",
        )
    if not f.data.strip():
        raise FetchError(f"{f.url}: the server sent an empty page", "check the address")
    rel = web_rel(f.url, ctype)
    links: list[str] = []
    extra: dict[str, Any] = {}
    extract_data = None
    if ctype in HTML_TYPES:
        main, title, links = parse_html(f.data, f.final_url)
        extract_data = main.encode("utf-8")
        if title:
            extra["title"] = title
    cand = store.Candidate(data=f.data, rel=rel, origin=f.url, source={"url": f.url}, extra=extra)
    if extract_data is not None:
        cand.extract_data = extract_data
    return cand, links


def web_fetch_info(f: Fetched) -> FetchInfo:
    return {
        "kind": "web",
        "url": f.final_url,
        "etag": f.etag,
        "last_modified": f.last_modified,
        "content_type": f.content_type,
        "status": f.status,
    }


def fetch_web(
    folder: Folder,
    url: str,
    *,
    depth: int = 0,
    same_host: bool = True,
    include: list[str] | None = None,
    exclude: list[str] | None = None,
    max_pages: int | None = None,
    client: WebClient | None = None,
    progress: Any = None,
) -> Batch:
    """Fetch a page and, up to `depth` links away, the pages it links to.

    The start page must succeed (or `FetchError`); linked pages that fail are reported in
    `skipped`. Links are followed within the start host (unless `same_host=False`), matching
    `include` globs and none of the `exclude` globs, at most `max_pages` pages.
    """
    start = canonical_url(check_url(url))
    if depth < 0:
        raise BadInput("--depth must be 0 or more", "0 fetches only the page itself")
    max_pages = int(max_pages or folder.setting("web.max_pages"))
    batch = Batch()
    own = client is None
    client = client or WebClient(folder)
    try:
        host = urlsplit(start).netloc
        queue: list[tuple[str, int]] = [(start, 0)]
        seen = {start}
        while queue and len(batch.cands) < max_pages:
            page, d = queue.pop(0)
            try:
                f = client.get(page)
                cand, links = page_candidate(f)
            except FetchError as e:
                if page == start:
                    raise
                skip: Skipped = {"path": page, "reason": e.message}
                if not isinstance(e, Disallowed):
                    skip["failed"] = True
                batch.skipped.append(skip)
                continue
            batch.cands.append(cand)
            batch.fetch[cand.origin] = web_fetch_info(f)
            if progress:
                progress(page)
            if d >= depth:
                continue
            for link in links:
                if link in seen or not _follow(link, host, same_host, include, exclude):
                    continue
                seen.add(link)
                queue.append((link, d + 1))
        if queue:
            batch.skipped += [
                {"path": u, "reason": f"over the --max-pages limit of {max_pages}"}
                for u, _ in queue
            ]
    finally:
        if own:
            client.__exit__()
    return batch


def _follow(
    link: str, host: str, same_host: bool, include: list[str] | None, exclude: list[str] | None
) -> bool:
    parts = urlsplit(link)
    if same_host and parts.netloc != host:
        return False

    def hit(globs: list[str]) -> bool:
        return any(fnmatch.fnmatch(link, g) or fnmatch.fnmatch(parts.path, g) for g in globs)

    if include and not hit(include):
        return False
    return not (exclude and hit(exclude))


# -- arXiv ----------------------------------------------------------------------------------
def parse_arxiv_id(raw: str) -> tuple[str, str | None]:
    """(base id, version or None) of an arXiv identifier; `BadInput` if it is not one."""
    s = raw.strip()
    for prefix in (
        "https://arxiv.org/abs/",
        "http://arxiv.org/abs/",
        "https://arxiv.org/pdf/",
        "http://arxiv.org/pdf/",
    ):
        if s.lower().startswith(prefix):
            s = s[len(prefix) :].removesuffix(".pdf")
    m = ARXIV_ID.match(s)
    if not m:
        raise BadInput(
            f"{raw!r} is not an arXiv identifier",
            "use e.g. 2401.01234, 2401.01234v2 or hep-th/9901001",
        )
    return m.group(1), (m.group(2) or None)


def _arxiv_client(folder: Folder) -> Any:
    import arxiv

    client = arxiv.Client(
        page_size=100,
        delay_seconds=folder.setting("arxiv.delay"),
        num_retries=folder.setting("arxiv.retries"),
    )
    client.query_url_format = folder.setting("arxiv.api_url")
    return client


def arxiv_lookup(folder: Folder, ids: list[str]) -> dict[str, Any]:
    """arXiv metadata for ids (as given): {given id: arxiv.Result}; `NotFound` if one is unknown."""
    import arxiv
    import requests

    parsed = {raw: parse_arxiv_id(raw) for raw in ids}
    wanted = [b + (v or "") for b, v in parsed.values()]
    client = _arxiv_client(folder)
    try:
        results = list(client.results(arxiv.Search(id_list=wanted, max_results=len(wanted))))
    except arxiv.HTTPError as e:
        raise FetchError(f"the arXiv API answered HTTP {e.status}", "try again later") from e
    except requests.exceptions.RequestException as e:
        raise FetchError(
            f"cannot reach the arXiv API: {_first_line(e)}",
            "check your network (arxiv.api_url sets the endpoint)",
        ) from e
    except arxiv.ArxivError as e:
        raise FetchError(f"the arXiv API failed: {e.message}", "try again later") from e
    by_base: dict[str, Any] = {}
    for r in results:
        if "/api/errors" in r.entry_id:
            continue
        base, _ = parse_arxiv_id(r.get_short_id())
        by_base[base] = r
    out = {}
    for raw, (base, _version) in parsed.items():
        if base not in by_base:
            raise NotFound(f"arXiv has no paper with id {raw!r}", "check the identifier")
        out[raw] = by_base[base]
    return out


def arxiv_meta(r: Any) -> ArxivMeta:
    short = r.get_short_id()
    _, version = parse_arxiv_id(short)
    meta: ArxivMeta = {
        "title": " ".join((r.title or "").split()),
        "authors": [a.name for a in r.authors],
        "abstract": " ".join((r.summary or "").split()),
        "published": iso(r.published),
        "updated": iso(r.updated),
        "version": version or "",
        "entry_id": r.entry_id,
        "categories": list(r.categories),
        "pdf_url": r.pdf_url,
    }
    if r.doi:
        meta["doi"] = r.doi
    return meta


def fetch_arxiv(
    folder: Folder,
    ids: list[str],
    client: WebClient | None = None,
    known: dict[str, str] | None = None,
) -> Batch:
    """Metadata and PDFs for arXiv ids. With `known` ({id: version}), papers whose latest
    version is already stored are not downloaded again."""
    if not ids:
        raise BadInput("no arXiv id given", "pass one or more ids, e.g. 2401.01234")
    for raw in ids:
        parse_arxiv_id(raw)  # every id is checked before any network access
    if known is None:
        _refuse_older_versions(folder, ids)
    meta = arxiv_lookup(folder, ids)
    batch = Batch()
    own = client is None
    client = client or WebClient(folder)
    try:
        for raw in ids:
            r = meta[raw]
            info = arxiv_meta(r)
            if known and known.get(raw) == info["version"]:
                batch.fetch[raw] = {"kind": "arxiv", "unchanged": True, **_arxiv_fetch(info)}
                continue
            if not r.pdf_url:
                raise FetchError(f"arXiv lists no PDF for {raw}", "the paper may be withdrawn")
            # the API hands us this link; robots.txt governs crawlers, not API clients
            f = client.get(r.pdf_url, robots=False)
            if f.content_type not in PDF_TYPES and not f.data.startswith(b"%PDF"):
                raise FetchError(
                    f"{r.pdf_url}: expected a PDF, got {f.content_type or 'unknown'}",
                    "try again later",
                )
            base, version = parse_arxiv_id(raw)
            rel = f"arxiv/{_safe_segment(base + (version or ''))}.pdf"
            cand = store.Candidate(
                data=f.data,
                rel=rel,
                origin=r.pdf_url,
                source={"arxiv": raw.strip()},
                extra={k: v for k, v in info.items()},
            )
            batch.cands.append(cand)
            batch.fetch[cand.origin] = _arxiv_fetch(info)
    finally:
        if own:
            client.__exit__()
    return batch


def _version_number(v: Any) -> int:
    return int(str(v)[1:]) if re.fullmatch(r"v\d+", str(v or "")) else 0


def _refuse_older_versions(folder: Folder, ids: list[str]) -> None:
    """An explicit version older than the current stored one would become a second current
    copy of the paper beside its successor; it is refused unless the store already keeps
    it as history (then storing it again is a no-op)."""
    papers: dict[str, list[MappingEntry]] = {}
    for e in mapping_mod.load(folder).values():
        if (e.get("source") or {}).get("arxiv"):
            base, _ = parse_arxiv_id(str(e["source"]["arxiv"]))
            papers.setdefault(base, []).append(e)
    for raw in ids:
        base, version = parse_arxiv_id(raw)
        if not version:
            continue
        stored = {
            _version_number((e.get("meta") or {}).get("version")): e for e in papers.get(base, [])
        }
        newer = [
            e for v, e in stored.items() if v > _version_number(version) and e.get("current", True)
        ]
        if newer and _version_number(version) not in stored:
            have = newer[0]
            raise BadInput(
                f"arXiv {raw} is older than the stored "
                f"{(have.get('meta') or {}).get('version')} of {base} "
                f"(document {have['id']})",
                f"the versions stored so far are in `ok store history {have['id']}`;"
                " an older version cannot join that history afterwards",
            )


def _arxiv_fetch(info: ArxivMeta) -> FetchInfo:
    return {
        "kind": "arxiv",
        "version": info["version"],
        "updated": info["updated"],
        "url": info["pdf_url"],
    }


# -- repositories --------------------------------------------------------------------------
def _git(args: list[str], cwd: Path | None = None, timeout: float = 300) -> str:
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "GIT_ASKPASS": "true"}
    try:
        proc = subprocess.run(
            ["git", *args], cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env
        )
    except FileNotFoundError as e:
        raise OkError("git is not installed", "install git to store repositories") from e
    except subprocess.TimeoutExpired as e:
        raise FetchError(f"git {args[0]} took longer than {timeout:g} s", "try again later") from e
    if proc.returncode != 0:
        msg = next((line for line in proc.stderr.splitlines() if line.strip()), "failed")
        raise FetchError(
            f"git {args[0]} failed: {msg.removeprefix('fatal: ')}",
            "check the repository address and branch",
        )
    return proc.stdout


def _is_url(target: str) -> bool:
    return "://" in target or bool(re.match(r"^[\w.-]+@[\w.-]+:", target))


def repo_name(target: str) -> str:
    name = re.split(r"[/:]", target.rstrip("/"))[-1].removesuffix(".git")
    return _safe_segment(name or "repo")


def checkout(folder: Folder, target: str, branch: str | None = None) -> tuple[Path, str]:
    """A working tree for `target` (a local path, or a clone under `.ok/cache/repos/`), and
    the repository's canonical name for `source.repo`."""
    if not _is_url(target):
        p = Path(target).expanduser().resolve()
        if not p.exists():
            raise BadInput(f"{target}: no such directory", "pass a repository path or git URL")
        if not p.is_dir():
            raise BadInput(f"{target} is not a directory", "pass the repository's top folder")
        if folder.root == p or folder.root in p.parents:
            raise BadInput(
                f"{target} is inside the knowledge folder",
                "use `ok store ingest` for files already in the folder",
            )
        if branch is None:
            return p, str(p)
        url, canonical = p.as_uri(), str(p)
    else:
        url = canonical = target
    dest = (
        folder.cache_dir
        / "repos"
        / hashlib.sha256(f"{url}\x00{branch or ''}".encode()).hexdigest()[:16]
    )
    if (dest / ".git").is_dir():
        _git(["fetch", "--depth", "1", "origin", branch or "HEAD"], cwd=dest)
        _git(["reset", "--hard", "FETCH_HEAD"], cwd=dest)
        _git(["clean", "-fdx"], cwd=dest)
    else:
        tmp = dest.with_name(dest.name + ".tmp")
        if tmp.exists():
            import shutil

            shutil.rmtree(tmp)
        tmp.parent.mkdir(parents=True, exist_ok=True)
        _git(
            [
                "clone",
                "--quiet",
                "--depth",
                "1",
                *(["--branch", branch] if branch else []),
                url,
                str(tmp),
            ]
        )
        os.replace(tmp, dest)
    return dest, canonical


def repo_files(tree: Path) -> list[str]:
    """Files of a working tree that git would track: .gitignore'd files are left out."""
    if (tree / ".git").exists():
        try:
            out = _git(["ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=tree)
            files = sorted({f for f in out.split("\0") if f})
            return [f for f in files if (tree / f).is_file()]
        except FetchError:
            pass
    return _walk_with_gitignore(tree)


def _walk_with_gitignore(tree: Path) -> list[str]:
    import pathspec

    out = []
    specs: list[tuple[str, Any]] = []
    for root, dirs, files in os.walk(tree):
        rel_root = Path(root).relative_to(tree).as_posix()
        rel_root = "" if rel_root == "." else rel_root
        gi = Path(root) / ".gitignore"
        if gi.is_file():
            lines = gi.read_text(encoding="utf-8", errors="replace").splitlines()
            specs.append((rel_root, pathspec.GitIgnoreSpec.from_lines(lines)))

        def ignored(rel: str, is_dir: bool) -> bool:
            for base, spec in specs:
                if base and not rel.startswith(base + "/"):
                    continue
                sub = rel[len(base) + 1 :] if base else rel
                if spec.match_file(sub + ("/" if is_dir else "")):
                    return True
            return False

        dirs[:] = sorted(
            d
            for d in dirs
            if d not in store.SKIP_DIRS
            and not d.startswith(".")
            and not ignored(f"{rel_root}/{d}".lstrip("/"), True)
        )
        for name in sorted(files):
            rel = f"{rel_root}/{name}".lstrip("/")
            if not name.startswith(".") and not ignored(rel, False):
                out.append(rel)
    return out


def fetch_repo(
    folder: Folder, target: str, include: list[str] | None = None, branch: str | None = None
) -> Batch:
    """Candidates for the files of a repository (local path or git URL)."""
    tree, canonical = checkout(folder, target, branch)
    commit = ""
    if (tree / ".git").exists():
        try:
            commit = _git(["rev-parse", "HEAD"], cwd=tree).strip()
        except FetchError:
            commit = ""  # a repository with no commits yet
    files = repo_files(tree)
    if include:
        files = [
            f
            for f in files
            if any(fnmatch.fnmatch(f, g) or fnmatch.fnmatch(Path(f).name, g) for g in include)
        ]
    else:
        files = [f for f in files if supported(Path(f))]
    if not files:
        raise BadInput(
            f"{target}: no files to store" + (" match --include" if include else ""),
            "check --include, or pass --include '*.ext' for other file types",
        )
    max_bytes = int(folder.setting("ingest.max_file_mb") * 1024 * 1024)
    name = repo_name(canonical)
    batch = Batch(tree=tree)
    info: FetchInfo = {
        "kind": "repo",
        "commit": commit,
        "include": list(include or []),
        **({"branch": branch} if branch else {}),
    }
    top = tree.resolve()
    for rel in files:
        p = tree / rel
        try:
            real = p.resolve()
            if real != top and top not in real.parents:
                # a cloned repository chooses its own links: one to ~/.ssh must not be stored
                batch.skipped.append(
                    {
                        "path": rel,
                        "reason": f"a symlink to {real}, outside the repository; not stored",
                    }
                )
                continue
            if p.stat().st_size > max_bytes:
                batch.skipped.append(
                    {
                        "path": rel,
                        "reason": f"larger than the {max_bytes >> 20}"
                        " MB limit (raise ingest.max_file_mb)",
                    }
                )
                continue
            data = p.read_bytes()
        except OSError as e:
            batch.skipped.append(
                {"path": rel, "reason": f"unreadable: {e.strerror or e}", "failed": True}
            )
            continue
        source: Source = {"repo": canonical, "file": rel}
        if branch:
            source["branch"] = branch
        cand = store.Candidate(
            data=data,
            rel=f"repos/{name}/{rel}",
            origin=str(p),
            source=source,
            extra={"commit": commit} if commit else {},
        )
        batch.cands.append(cand)
        batch.fetch[cand.origin] = info
    return batch


# -- storing ---------------------------------------------------------------------------------
def ingest_batch(
    folder: Folder,
    batch: Batch,
    policy: RefreshPolicy | None = None,
    drift_threshold: float | None = None,
) -> store.IngestReport:
    """Ingest what a fetch produced and record fetch details on the mapping entries.

    The caller holds the writer lock.
    """
    rep = store.IngestReport(skipped=list(batch.skipped))
    store.ingest(folder, batch.cands, rep, policy=policy, drift_threshold=drift_threshold)
    rep.unchanged += [u for u, _ in batch.kept]
    record_fetch(folder, batch, rep, policy)
    return rep


def record_fetch(
    folder: Folder, batch: Batch, rep: store.IngestReport, policy: RefreshPolicy | None = None
) -> None:
    by_origin = {c.origin: c.source for c in batch.cands}
    by_origin.update({u["origin"]: src for u, src in batch.kept})
    entries = mapping_mod.load(folder)
    now = iso()
    changed = False
    for item in rep.added + rep.unchanged:
        origin = item["origin"]
        e = entries.get(item["id"])
        if origin not in by_origin or e is None or e.get("source") != by_origin[origin]:
            continue
        fetch = batch.fetch.get(origin, {})
        e["fetch"] = cast(FetchInfo, {k: v for k, v in fetch.items() if v is not None})
        e["fetched_at"] = now
        e.pop("refresh_error", None)
        if policy or batch.policies.get(origin):
            e["refresh"] = policy or batch.policies[origin]
        changed = True
    if changed:
        mapping_mod.save(folder, entries)
        folder.log_op("store.fetch", sources=len(batch.cands), policy=policy)
