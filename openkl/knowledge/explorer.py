"""The web explorer's page: its shell, script and styles under openkl/data/web/, with
vendor.js, the npm libraries pinned in web/package-lock.json as web/build.mjs bundles them;
served by `ok serve` at `/`, or inlined into one self-contained HTML file by
`ok graph export --format html`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..errors import NotFound

WEB_DIR = Path(__file__).parent.parent / "data" / "web"
ASSETS = {
    "vendor.js": "text/javascript",
    "app.js": "text/javascript",
    "app.css": "text/css",
    "index.html": "text/html",
}


def asset(name: str) -> str:
    """One bundled asset's text; NotFound for a name the bundle does not hold."""
    if name not in ASSETS:
        raise NotFound(f"no asset {name!r}", "the page's assets are " + ", ".join(ASSETS))
    return (WEB_DIR / name).read_text(encoding="utf-8")


def bundle_header() -> str:
    """The first line of vendor.js: which libraries, at which versions, it holds."""
    return asset("vendor.js").split("\n", 1)[0]


def served_page() -> str:
    """The page `ok serve` answers `/` with: it loads its assets from /ui/."""
    return (
        asset("index.html")
        .replace("<!--OK:CSS-->", '<link rel="stylesheet" href="/ui/app.css">')
        .replace("<!--OK:DATA-->", "")
        .replace(
            "<!--OK:JS-->",
            '<script src="/ui/vendor.js"></script><script src="/ui/app.js"></script>',
        )
    )


def _script(text: str) -> str:
    return "<script>" + text.replace("</script", "<\\/script") + "</script>"


def standalone_page(stack: str, neighbourhood: Any) -> str:
    """One HTML file holding the page, its assets and a neighbourhood's data: the graph view
    works from a file, with no server."""
    data = json.dumps({"stack": stack, "neighbourhood": neighbourhood}, ensure_ascii=False)
    return (
        asset("index.html")
        .replace("<!--OK:CSS-->", "<style>" + asset("app.css") + "</style>")
        .replace(
            "<!--OK:DATA-->", _script("window.OK_DATA = " + data.replace("<", "\\u003c") + ";")
        )
        .replace("<!--OK:JS-->", _script(asset("vendor.js")) + _script(asset("app.js")))
    )
