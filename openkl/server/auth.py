"""Who may call `ok serve`: API keys kept hashed per folder, or JWTs; scopes per stack; and
a token bucket per caller.

A stack is a tenant. A key lives in one folder's `.ok/keys.json` and opens that stack only;
a JWT names its stacks in `scope` (`kb:read other:write`). Scopes nest: write includes
read, admin includes both. The stack `*` in a JWT's scope (`*:read`, `*:admin`) stands for
every stack, those created later too, and is what /metrics asks for: it is the operator's,
minted only by whoever holds the server's JWT signing key. No key carries it, and no stack
can be named `*` (stack names are checked as `stacks.check_name` checks them).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import secrets
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, TypedDict

from ..errors import BadInput, NotFound, OkError
from ..files.folder import PRIVATE, Folder, atomic_write, iso

SCOPES = ("read", "write", "admin")
PREFIX = "okk_"
EVERY = "*"  # a JWT's stack standing for every stack
# what a stack in a JWT's scope may be (as `stacks.check_name` allows, or `*`)
_SCOPE_STACK = re.compile(r"\*|[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


class Unauthorized(OkError):
    """No credentials, or credentials that prove nothing (401)."""

    http_status = 401


class Forbidden(OkError):
    """Good credentials that do not allow this (403)."""

    http_status = 403


class RateLimited(OkError):
    """Too many requests from one caller (429)."""

    http_status = 429

    def __init__(self, retry_after: float) -> None:
        super().__init__(
            f"too many requests: try again in {retry_after:.1f} s",
            "slow down, or raise serve.rate_limit (serve.local_rate_limit without credentials)",
        )
        self.retry_after = retry_after


class KeyRecord(TypedDict):
    """One API key as kept in `.ok/keys.json`: never the key itself, only its hash."""

    id: str
    name: str
    scope: str
    sha256: str
    created: str
    revoked: str | None


def _path(folder: Folder) -> Any:
    return folder.ok_dir / "keys.json"


def load_keys(folder: Folder) -> list[KeyRecord]:
    """The folder's API keys, revoked ones too."""
    try:
        data = json.loads(_path(folder).read_text() or "[]")
    except FileNotFoundError:
        return []
    except (OSError, ValueError) as e:
        raise BadInput(
            f"cannot read {_path(folder)}: {e}", "fix or remove the file, then add keys again"
        ) from e
    return list(data)


def _save(folder: Folder, keys: list[KeyRecord]) -> None:
    atomic_write(_path(folder), json.dumps(keys, indent=1) + "\n", mode=PRIVATE)


def _digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def add_key(folder: Folder, name: str, scope: str) -> tuple[KeyRecord, str]:
    """A new key for this folder's stack: its record, and the key (shown this once)."""
    if scope not in SCOPES:
        raise BadInput(f"unknown scope {scope!r}", "use one of: " + ", ".join(SCOPES))
    if not name.strip():
        raise BadInput("a key needs a name", "name it after who will use it, e.g. `laptop`")
    kid = "k" + secrets.token_hex(4)
    key = f"{PREFIX}{kid}_{secrets.token_urlsafe(32)}"
    rec = KeyRecord(
        id=kid, name=name, scope=scope, sha256=_digest(key), created=iso(), revoked=None
    )
    with folder.write_lock("serve keys add"):
        _save(folder, [*load_keys(folder), rec])
    return rec, key


def revoke_key(folder: Folder, ref: str) -> KeyRecord:
    """Revoke a key by id or name; it stays listed, as revoked."""
    with folder.write_lock("serve keys revoke"):
        keys = load_keys(folder)
        hits = [k for k in keys if ref in (k["id"], k["name"]) and not k["revoked"]]
        if not hits:
            raise NotFound(f"no live key {ref!r}", "see `ok serve keys list`")
        if len(hits) > 1:
            raise BadInput(f"{len(hits)} keys are named {ref!r}", "revoke one by its id")
        hits[0]["revoked"] = iso()
        _save(folder, keys)
    return hits[0]


def _implies(have: str, need: str) -> bool:
    return have in SCOPES and SCOPES.index(have) >= SCOPES.index(need)


@dataclass(frozen=True)
class Caller:
    """Who is calling, and what each stack lets them do."""

    who: str
    scopes: dict[str, str]  # stack → the highest scope held ("*": every stack)
    key_id: str = ""  # the API key's id (k…), when a key made the call

    def allows(self, stack: str, need: str) -> bool:
        return any(
            have is not None and _implies(have, need)
            for have in (self.scopes.get(stack), self.scopes.get(EVERY))
        )

    def operator(self, need: str) -> bool:
        """`need` on every stack, present and future (what server-wide routes ask for)."""
        have = self.scopes.get(EVERY)
        return have is not None and _implies(have, need)

    def allows_all(self, stacks: Iterable[str], need: str) -> bool:
        """`need` on every one of `stacks` (what MCP and /metrics ask for)."""
        return all(self.allows(s, need) for s in stacks)

    def require(self, stack: str, need: str) -> None:
        """Raise `Forbidden` unless the caller may `need` this stack."""
        if not self.allows(stack, need):
            raise Forbidden(
                f"{self.who} may not {need} stack {stack!r}",
                "use a key or token with that scope for that stack",
            )


OPEN = Caller("local", {EVERY: "admin"})  # auth off: loopback or a socket


@dataclass(frozen=True)
class JwtConfig:
    """How JWTs are checked: HS256 with a shared secret, or RS256 with a public key."""

    secret: str | None = None
    public_key: str | None = None
    issuer: str | None = None
    audience: str | None = None


class Authenticator:
    """Turns a request's credentials into a `Caller`, for the stacks served."""

    def __init__(self, folders: dict[str, Folder], jwt: JwtConfig | None = None) -> None:
        self.folders = folders
        self.jwt = jwt or JwtConfig()

    def caller(self, header: str | None) -> Caller:
        if not header:
            raise Unauthorized(
                "this server needs credentials", "send `Authorization: Bearer KEY-OR-JWT`"
            )
        scheme, _, token = header.partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            raise Unauthorized(
                "credentials must be a bearer token", "send `Authorization: Bearer KEY-OR-JWT`"
            )
        if token.startswith(PREFIX):
            return self._key(token)
        return self._token(token)

    def _key(self, key: str) -> Caller:
        kid = key[len(PREFIX) :].split("_", 1)[0]
        digest = _digest(key)
        for stack, folder in self.folders.items():
            if stack == EVERY:  # never served (`Stacks` refuses the name): never a wildcard
                continue
            for rec in load_keys(folder):
                if rec["id"] == kid and hmac.compare_digest(rec["sha256"], digest):
                    if rec["revoked"]:
                        raise Unauthorized("this key was revoked", "ask for a new key")
                    return Caller(
                        f"key:{stack}/{rec['name']}", {stack: rec["scope"]}, key_id=rec["id"]
                    )
        raise Unauthorized("unknown API key", "check the key, or add one: ok serve keys add")

    def _token(self, token: str) -> Caller:
        import jwt

        key = self.jwt.public_key or self.jwt.secret
        if not key:
            raise Unauthorized(
                "this server accepts no JWTs", "set serve.jwt_secret_env or serve.jwt_public_key"
            )
        try:
            claims = jwt.decode(
                token,
                key,
                algorithms=["RS256"] if self.jwt.public_key else ["HS256"],
                issuer=self.jwt.issuer,
                audience=self.jwt.audience,
                options={"require": ["exp", "sub"]},
            )
        except jwt.ExpiredSignatureError as e:
            raise Unauthorized("the token has expired", "get a new token") from e
        except jwt.PyJWTError as e:
            raise Unauthorized(f"bad token: {e}", "check its signature, issuer and audience") from e
        scopes: dict[str, str] = {}
        for item in str(claims.get("scope", "")).split():
            stack, _, scope = item.rpartition(":")
            if (
                _SCOPE_STACK.fullmatch(stack)
                and ".." not in stack
                and scope in SCOPES
                and _implies(scope, scopes.get(stack, "read"))
            ):
                scopes[stack] = scope
        return Caller(f"jwt:{claims['sub']}", scopes)


class RateLimiter:
    """A token bucket per caller: `rate` requests a second, bursts of `burst`."""

    def __init__(self, rate: float, burst: int) -> None:
        self.rate, self.burst = rate, max(1, burst)
        self._buckets: dict[str, tuple[float, float]] = {}
        self._lock = threading.Lock()

    def take(self, who: str) -> None:
        if self.rate <= 0:
            return
        now = time.monotonic()
        with self._lock:
            tokens, last = self._buckets.get(who, (float(self.burst), now))
            tokens = min(float(self.burst), tokens + (now - last) * self.rate)
            if tokens < 1:
                self._buckets[who] = (tokens, now)
                raise RateLimited((1 - tokens) / self.rate)
            self._buckets[who] = (tokens - 1, now)
