"""What a request must show before any route of `ok serve` sees it, and how long it may
take to show it.

- A `Host` that names this server: loopback, the address it is bound to, or
  `serve.allowed_hosts` (else 421). A page whose name an attacker re-points at 127.0.0.1
  (DNS rebinding) sends its own name, and is refused on every route, /mcp included.
- A browser's request from another origin is refused unless that origin is the server's
  own or in `serve.cors_origins` (403). A browser always sends `Origin` on a request that is
  not a GET or HEAD, and on every cross-origin fetch; a write that carries none is still
  refused when `Sec-Fetch-Site` or `Referer` say it comes from elsewhere. A client that is
  not a browser (curl, httpx, an agent) sends none of these and is let through, to meet the
  credentials, if any.
- A route that takes JSON refuses any other declared content type (415): a form or
  `text/plain` is what a cross-site page can send without asking.
- Headers arrive within `serve.header_timeout` seconds (`header_timeout_protocol`), so slow
  clients cannot keep connections open for ever.
"""

from __future__ import annotations

import ipaddress
import re
import socket
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from fastapi.responses import JSONResponse

LOOPBACK = ("localhost", "127.0.0.1", "::1")
# methods that change nothing, which a page may send anywhere without a preflight anyway
SAFE = frozenset({"GET", "HEAD", "OPTIONS"})
# the routes whose body is not JSON: documents (raw bytes or a multipart form)
RAW_BODY = re.compile(r"/(?:v1|stacks)/[^/]+/documents/?")
# what `Sec-Fetch-Site` says of a request a page of another origin made
FOREIGN_FETCH = frozenset({"cross-site", "same-site"})


def _refused(status: int, error: str, hint: str) -> JSONResponse:
    return JSONResponse({"error": error, "hint": hint}, status_code=status)


def split_host(value: str) -> tuple[str, int | None] | None:
    """A Host header (or an allowed host) as (lowercase name, port or None): `name`,
    `name:port`, `[v6]`, `[v6]:port`, a bare IPv6 address. None when it is not one."""
    value = value.strip().lower()
    if not value or any(c in value for c in "/\\@?#% \t"):
        return None
    port: str | None = None
    if value.startswith("["):
        name, sep, rest = value[1:].partition("]")
        if not sep or (rest and not rest.startswith(":")):
            return None
        port = rest[1:] if rest else None
    elif value.count(":") == 1:
        name, port = value.split(":")
    else:
        name = value  # a name, or a bare IPv6 address
    if port is not None and not (port.isdigit() and 0 < int(port) < 65536):
        return None
    name = name.removesuffix(".")  # `localhost.` is `localhost`
    if not name:
        return None
    return name, int(port) if port else None


def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def _origin(value: str) -> tuple[str, str, int] | None:
    """A web origin (or a page's address) as (scheme, lowercase host, port)."""
    try:
        u = urlsplit(value.strip())
        port = u.port
    except ValueError:
        return None
    if u.scheme not in ("http", "https") or not u.hostname:
        return None
    return u.scheme, u.hostname.lower(), port or (443 if u.scheme == "https" else 80)


@dataclass(frozen=True)
class Guard:
    """The Host names and web origins a server answers (see the module's docstring)."""

    names: frozenset[str]  # answered on any port
    pairs: frozenset[tuple[str, int]]  # answered on that port only
    origins: frozenset[tuple[str, str, int]]  # serve.cors_origins
    any_host: bool = False  # serve.allowed_hosts `*`, or a unix socket (no browser reaches it)
    any_ip: bool = False  # bound to every address: an address literal is one of ours
    any_origin: bool = False  # serve.cors_origins `*`

    @classmethod
    def of(
        cls,
        bound: str,
        allowed_hosts: Iterable[str] = (),
        cors_origins: Iterable[str] = (),
        unix: bool = False,
    ) -> Guard:
        """The guard of a server bound to `bound` (`unix`: on a socket file), answering also
        `allowed_hosts` and the browser origins `cors_origins`."""
        names = set(LOOPBACK)
        pairs: set[tuple[str, int]] = set()
        wildcard = bound in ("0.0.0.0", "::", "")
        if not wildcard:
            names.add(bound.strip("[]").lower())
        else:
            names.add(socket.gethostname().lower())
        allowed = [h.strip() for h in allowed_hosts if h.strip()]
        for h in allowed:
            got = split_host(h)
            if h == "*" or got is None:
                continue
            if got[1] is None:
                names.add(got[0])
            else:
                pairs.add((got[0], got[1]))
        cors = [o.strip().rstrip("/") for o in cors_origins if o.strip()]
        origins = {o for o in (_origin(c) for c in cors if c != "*") if o is not None}
        return cls(
            names=frozenset(names),
            pairs=frozenset(pairs),
            origins=frozenset(origins),
            any_host=unix or "*" in allowed,
            any_ip=wildcard,
            any_origin="*" in cors,
        )

    def host_ok(self, host: tuple[str, int | None]) -> bool:
        name, port = host
        if self.any_host or name in self.names or (self.any_ip and _is_ip(name)):
            return True
        return port is not None and (name, port) in self.pairs

    def _own(self, origin: tuple[str, str, int], host: tuple[str, int | None]) -> bool:
        """Whether a browser origin is the server's own (the page came from this Host) or
        one serve.cors_origins allows."""
        scheme, name, port = origin
        if name == host[0] and port == (host[1] or (443 if scheme == "https" else 80)):
            return True
        return self.any_origin or origin in self.origins

    def refusal(self, scope: Any) -> JSONResponse | None:
        """Why this request is refused before any route sees it, or None."""
        headers: dict[bytes, bytes] = {}
        for k, v in scope.get("headers") or ():
            headers.setdefault(k, v)  # the first of a repeated header, as Starlette reads it

        def header(name: bytes) -> str | None:
            v = headers.get(name)
            return v.decode("latin-1") if v is not None else None

        raw_host = header(b"host") or ""
        host = split_host(raw_host)
        if host is None or not self.host_ok(host):
            return _refused(
                421,
                f"this server does not answer to the Host {raw_host[:100]!r}",
                "call it by its own address (127.0.0.1, localhost, its --host), or add the "
                "name to serve.allowed_hosts",
            )
        method = scope.get("method", "GET")
        origin = header(b"origin")
        if origin is not None:
            seen = _origin(origin)
            if seen is None or not self._own(seen, host):
                return _cross_site(f"from the web origin {origin[:100]!r}")
        elif method not in SAFE:
            site = (header(b"sec-fetch-site") or "").strip().lower()
            if site in FOREIGN_FETCH:
                return _cross_site(f"from another site (Sec-Fetch-Site: {site})")
            referer = header(b"referer")
            if referer is not None:
                page = _origin(referer)
                if page is None or not self._own(page, host):
                    return _cross_site("from a page of another origin (its Referer)")
        if method not in SAFE and not RAW_BODY.fullmatch(scope.get("path", "")):
            kind = header(b"content-type")
            if kind is not None and not _is_json(kind):
                return _refused(
                    415,
                    f"this route takes JSON, not {kind.split(';', 1)[0].strip()[:100]!r}",
                    "send the body with Content-Type: application/json",
                )
        return None


def _cross_site(where: str) -> JSONResponse:
    return _refused(
        403,
        f"a browser request {where} is refused",
        "use the explorer this server serves at /, or add the page's origin to serve.cors_origins",
    )


def _is_json(content_type: str) -> bool:
    kind = content_type.split(";", 1)[0].strip().lower()
    return kind == "application/json" or (
        kind.startswith("application/") and kind.endswith("+json")
    )


class Guarded:
    """Refuse what `guard` refuses before anything else runs (plain ASGI)."""

    def __init__(self, app: Any, guard: Guard) -> None:
        self.app, self.guard = app, guard

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        refused = self.guard.refusal(scope) if scope["type"] == "http" else None
        if refused is not None:
            await refused(scope, receive, send)
        else:
            await self.app(scope, receive, send)


def header_timeout_protocol(seconds: float) -> type:
    """uvicorn's HTTP/1.1 protocol with a deadline on each request's head: a client that has
    not sent a whole request line and headers `seconds` after it connected, or after its
    last response ended, is answered 408 (if it sent anything) and disconnected. uvicorn
    alone lets a client that trickles a header line now and then hold its connection for
    ever."""
    import asyncio

    import h11
    from uvicorn.protocols.http.h11_impl import H11Protocol

    timeout_body = (
        b'{"error": "the request headers did not arrive within serve.header_timeout", '
        b'"hint": "send the whole request at once"}'
    )
    timed_out = (
        b"HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\n"
        b"connection: close\r\ncontent-length: " + str(len(timeout_body)).encode() + b"\r\n\r\n"
    ) + timeout_body

    class HeaderTimeout(H11Protocol):  # type: ignore[misc]
        _deadline: asyncio.TimerHandle | None = None
        _partial = False  # some of a request's head has arrived

        def _arm(self) -> None:
            self._disarm()
            self._partial = False
            self._deadline = self.loop.call_later(seconds, self._too_slow)

        def _disarm(self) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
                self._deadline = None

        def _too_slow(self) -> None:
            self._deadline = None
            if self.transport.is_closing() or self.conn.their_state is not h11.IDLE:
                return
            if self._partial:
                self.transport.write(timed_out)
            self.transport.close()

        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            self._arm()

        def data_received(self, data: bytes) -> None:
            waiting = self._deadline is not None
            super().data_received(data)
            if waiting and self.conn.their_state is not h11.IDLE:
                self._disarm()  # the head is in: the route decides how long the rest takes
            elif data:
                self._partial = True

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing():
                self._arm()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

    return HeaderTimeout
