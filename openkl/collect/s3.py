"""S3 sources: the objects under `s3://bucket/prefix`, on AWS S3 or an S3-compatible store.

`s3://bucket/docs` names the object `docs` when there is one, and otherwise every object
under `docs/` (as `aws s3 cp --recursive` reads it); `s3://bucket` names the whole bucket.
Without `--include` only the file types openkl reads are taken.

Credentials come from boto3's usual chain (AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, a
profile in ~/.aws/credentials, an instance role…); `s3.profile` (or `--profile`) names a
profile, `s3.endpoint_url` (or `--endpoint-url`) an S3-compatible store; a public bucket is
read unsigned with `--no-sign-request`, as the aws CLI reads it. A document's
source is the object's URL, with the endpoint when there is one; what the fetch learnt
(ETag, size, when it was last modified, the prefix stored) is in its `fetch`.

Storing a prefix again downloads no object whose ETag is the one stored. A refresh lists
the prefix again: an object whose ETag is unchanged is not downloaded, a changed one
becomes a new version, a new one is added (with the prefix's refresh policy), and a
document whose object is gone is removed, as a file deleted from a repository is.

Network access happens only here, and only when the user asked for it.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import urlsplit

from ..errors import BadInput, NotFound, OkError
from ..files import mapping as mapping_mod
from ..files.folder import Folder, iso
from ..records import FetchInfo, MappingEntry, RefreshPolicy, Skipped, Source
from ..text.normalize import supported
from . import store
from .sources import Batch, FetchError

URL_FORM = "pass e.g. s3://bucket/prefix"
# what S3 takes as a bucket name, old (path-style) names included
_BUCKET = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{1,254}$")
_SEGMENT_MAX = 120  # bytes of a key's segment kept in a file name under store/sources/


@dataclass(frozen=True)
class Location:
    """A bucket and a prefix in it, as `s3://bucket/prefix` names them."""

    bucket: str
    prefix: str

    @property
    def url(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}"

    def object_url(self, key: str) -> str:
        return f"s3://{self.bucket}/{key}"


def parse_url(url: str) -> Location:
    """The bucket and prefix of an `s3://` URL; `BadInput` when it is not one."""
    raw = url.strip()
    if not raw.lower().startswith("s3://"):
        raise BadInput(f"{url!r} is not an s3:// URL", URL_FORM)
    bucket, _, prefix = raw[5:].partition("/")
    if not bucket:
        raise BadInput(f"{url!r} names no bucket", URL_FORM)
    if not _BUCKET.match(bucket) or ".." in bucket:
        raise BadInput(
            f"{bucket!r} is not a bucket name",
            "bucket names are 3-63 letters, digits, dots and hyphens: " + URL_FORM,
        )
    if any(ord(c) < 32 for c in prefix):
        raise BadInput(f"{url!r} holds a control character", URL_FORM)
    return Location(bucket, prefix)


def check_endpoint(endpoint: str | None) -> str | None:
    """The endpoint URL as given (None: AWS); `BadInput` unless it is an http(s) address."""
    if endpoint is None or not endpoint.strip():
        return None
    p = urlsplit(endpoint.strip())
    if p.scheme not in ("http", "https") or not p.netloc:
        raise BadInput(
            f"endpoint {endpoint!r} is not an http(s) URL",
            "pass e.g. --endpoint-url http://127.0.0.1:9000 (or set s3.endpoint_url)",
        )
    return endpoint.strip().rstrip("/")


@dataclass
class Access:
    """How to reach a store: its endpoint (None: AWS) and the profile to sign with (or,
    `anonymous`, no signature: a public bucket)."""

    endpoint: str | None = None
    profile: str | None = None
    anonymous: bool = False

    def where(self) -> str:
        return self.endpoint or "AWS S3"


def access(
    folder: Folder,
    endpoint: str | None = None,
    profile: str | None = None,
    anonymous: bool = False,
) -> Access:
    """The endpoint and profile a command uses: its options, else the folder's settings."""
    chosen = endpoint if endpoint is not None else folder.setting("s3.endpoint_url")
    if anonymous:
        if profile:
            raise BadInput(
                "--no-sign-request and --profile contradict each other",
                "a public bucket is read without credentials: drop --profile",
            )
        return Access(check_endpoint(chosen), None, True)
    named = profile if profile is not None else folder.setting("s3.profile")
    return Access(check_endpoint(chosen), (named or "").strip() or None)


def client(folder: Folder, acc: Access) -> Any:
    """A boto3 S3 client for `acc`, made fresh (so it sees the caller's environment)."""
    import boto3
    import botocore
    import botocore.config
    import botocore.exceptions

    timeout = float(folder.setting("s3.timeout"))
    region = folder.setting("s3.region") or None
    try:
        session = boto3.session.Session(profile_name=acc.profile, region_name=region)
    except botocore.exceptions.ProfileNotFound as e:
        raise BadInput(
            f"the AWS profile {acc.profile!r} is not configured",
            "add it to ~/.aws/credentials, or name another with --profile or s3.profile",
        ) from e
    config = botocore.config.Config(
        connect_timeout=timeout,
        read_timeout=timeout,
        retries={"max_attempts": 2, "mode": "standard"},
        user_agent_extra="openkl",
        # S3-compatible stores (MinIO, Ceph) are reached by path: http://host/bucket/key
        s3={"addressing_style": "path"} if acc.endpoint else {},
        **({"signature_version": botocore.UNSIGNED} if acc.anonymous else {}),
    )
    try:
        return session.client("s3", endpoint_url=acc.endpoint, config=config)
    except ValueError as e:  # botocore's "Invalid endpoint"
        raise BadInput(f"{acc.endpoint}: {e}", "pass an http(s) endpoint URL") from e


@contextmanager
def _errors(loc: Location, acc: Access, what: str = "") -> Iterator[None]:
    """botocore's exceptions as one line each: what went wrong and how to fix it."""
    import botocore.exceptions as bx

    target = what or loc.url
    try:
        yield
    except OkError:
        raise
    except bx.NoCredentialsError as e:
        raise OkError(
            "no AWS credentials found",
            "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or name a profile of "
            "~/.aws/credentials with AWS_PROFILE, --profile or s3.profile",
        ) from e
    except bx.PartialCredentialsError as e:
        raise OkError(
            f"the AWS credentials are incomplete: {e}",
            "set both AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY",
        ) from e
    except bx.ProfileNotFound as e:
        raise BadInput(f"{e}", "add the profile to ~/.aws/credentials, or name another") from e
    except bx.ClientError as e:
        err = e.response.get("Error", {})
        code = str(err.get("Code") or "")
        status = e.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        if code == "NoSuchBucket":
            raise NotFound(
                f"the bucket {loc.bucket!r} does not exist on {acc.where()}",
                "check the bucket's name, and --endpoint-url or s3.endpoint_url",
            ) from e
        if code == "NoSuchKey":
            raise NotFound(f"{target} does not exist", "list the bucket to find it") from e
        if code in ("InvalidAccessKeyId", "SignatureDoesNotMatch", "InvalidToken"):
            raise OkError(
                f"{acc.where()} refused the AWS credentials ({code})",
                "check AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or the profile",
            ) from e
        if code in ("AccessDenied", "AllAccessDisabled") or status == 403:
            raise OkError(
                f"access denied to {target}",
                "the credentials in use may not list or read it: check their policy",
            ) from e
        if code == "InvalidObjectState":
            raise FetchError(
                f"{target} is archived (Glacier) and cannot be read",
                "restore it first, then store it again",
            ) from e
        message = str(err.get("Message") or code or e)
        raise FetchError(
            f"{target}: {message} ({code or status})",
            "try again later" if (status or 0) >= 500 else "check the URL and the endpoint",
        ) from e
    except bx.EndpointConnectionError as e:
        raise FetchError(
            f"cannot reach {acc.where()}: {_first_line(e)}",
            "check --endpoint-url or s3.endpoint_url, and your network",
        ) from e
    except (bx.ConnectTimeoutError, bx.ReadTimeoutError) as e:
        raise FetchError(f"{acc.where()} did not answer in time", "raise s3.timeout") from e
    except bx.ParamValidationError as e:
        raise BadInput(f"{target}: {_first_line(e)}", URL_FORM) from e
    except bx.BotoCoreError as e:
        raise FetchError(f"{target}: {_first_line(e)}", "try again later") from e


def _first_line(e: BaseException) -> str:
    return (str(e).splitlines() or [""])[0][:200]


@dataclass
class Obj:
    key: str
    etag: str
    size: int
    last_modified: str


@dataclass
class Listing:
    """The objects a location names worth reading, every key it names, and every key
    that starts with its prefix (a key not among those is gone)."""

    loc: Location
    objects: list[Obj] = field(default_factory=list)
    keys: set[str] = field(default_factory=set)
    present: set[str] = field(default_factory=set)
    skipped: list[Skipped] = field(default_factory=list)


def list_objects(
    folder: Folder, c: Any, loc: Location, acc: Access, include: list[str] | None
) -> Listing:
    """List what `loc` names: one object, or the objects under it as a folder."""
    out = Listing(loc)
    found: list[dict[str, Any]] = []
    with _errors(loc, acc):
        for page in c.get_paginator("list_objects_v2").paginate(
            Bucket=loc.bucket, Prefix=loc.prefix
        ):
            found += page.get("Contents") or []
    out.present = {str(o["Key"]) for o in found}
    if loc.prefix and not loc.prefix.endswith("/"):
        exact = [o for o in found if o["Key"] == loc.prefix]
        found = exact or [o for o in found if o["Key"].startswith(loc.prefix + "/")]
    max_bytes = int(folder.setting("ingest.max_file_mb") * 1024 * 1024)
    for o in found:
        key = str(o["Key"])
        if key.endswith("/"):
            continue  # a folder marker, not a document
        out.keys.add(key)
        name = PurePosixPath(key).name
        if include:
            if not any(fnmatch.fnmatch(key, g) or fnmatch.fnmatch(name, g) for g in include):
                continue
        elif not supported(Path(key)):
            continue
        size = int(o.get("Size") or 0)
        if size > max_bytes:
            out.skipped.append(
                {
                    "path": loc.object_url(key),
                    "reason": f"larger than the {max_bytes >> 20} MB limit "
                    "(raise ingest.max_file_mb)",
                }
            )
            continue
        modified = o.get("LastModified")
        out.objects.append(
            Obj(key, str(o.get("ETag") or ""), size, iso(modified) if modified else "")
        )
    return out


def object_rel(loc: Location, key: str, acc: Access) -> str:
    """Where an object's original goes under `store/sources/` (stable for an object)."""
    segs = [_segment(s) for s in key.split("/") if s not in ("", ".", "..")] or ["_"]
    top = ["s3"]
    if acc.endpoint:
        p = urlsplit(acc.endpoint)
        top.append(_segment((p.hostname or "host") + (f"_{p.port}" if p.port else "")))
    return "/".join([*top, _segment(loc.bucket), *segs])


def _segment(s: str) -> str:
    s = re.sub(r"[\x00-\x1f/\\]+", "_", s).strip() or "_"
    if s.startswith("."):
        s = "_" + s[1:]
    if len(s.encode()) > _SEGMENT_MAX:  # a file name has at most 255 bytes
        suffix = PurePosixPath(s).suffix[:16]
        keep = _SEGMENT_MAX - len(suffix.encode())
        s = s.encode()[:keep].decode("utf-8", "ignore") + suffix
    return s


def source_of(loc: Location, key: str, acc: Access) -> Source:
    src: Source = {"s3": loc.object_url(key)}
    if acc.endpoint:
        src["endpoint"] = acc.endpoint
    return src


def download(
    c: Any, loc: Location, obj: Obj, acc: Access, max_bytes: int
) -> tuple[bytes, FetchInfo]:
    """An object's bytes and what to record of it (its ETag as the read returned it)."""
    url = loc.object_url(obj.key)
    with _errors(loc, acc, url):
        got = c.get_object(Bucket=loc.bucket, Key=obj.key)
        body = got["Body"]
        try:
            data = body.read(max_bytes + 1)
        finally:
            body.close()
    if len(data) > max_bytes:
        raise FetchError(
            f"{url}: larger than the {max_bytes >> 20} MB limit", "raise ingest.max_file_mb"
        )
    modified = got.get("LastModified")
    info: FetchInfo = {
        "kind": "s3",
        "etag": str(got.get("ETag") or obj.etag),
        "last_modified": iso(modified) if modified else obj.last_modified,
        "size": len(data),
    }
    return data, info


def _candidate(
    folder: Folder,
    c: Any,
    loc: Location,
    obj: Obj,
    acc: Access,
    batch: Batch,
    base: FetchInfo,
) -> store.Candidate | None:
    """Download one object into `batch`; a failure is a failed skip, not the batch's end."""
    max_bytes = int(folder.setting("ingest.max_file_mb") * 1024 * 1024)
    url = loc.object_url(obj.key)
    try:
        data, info = download(c, loc, obj, acc, max_bytes)
    except OkError as e:  # gone since the listing, not readable with these credentials …
        batch.skipped.append({"path": url, "reason": str(e), "failed": True})
        return None
    cand = store.Candidate(
        data=data,
        rel=object_rel(loc, obj.key, acc),
        origin=url,
        source=source_of(loc, obj.key, acc),
    )
    batch.cands.append(cand)
    batch.fetch[cand.origin] = {**base, **info}
    return cand


def _base_info(loc: Location, acc: Access, include: list[str] | None) -> FetchInfo:
    info: FetchInfo = {"kind": "s3", "prefix": loc.url, "include": list(include or [])}
    if acc.profile:
        info["profile"] = acc.profile
    if acc.anonymous:
        info["anonymous"] = True
    return info


def fetch_s3(
    folder: Folder,
    url: str,
    *,
    include: list[str] | None = None,
    endpoint: str | None = None,
    profile: str | None = None,
    anonymous: bool = False,
) -> Batch:
    """Candidates for the objects `url` names (see the module's docstring). Every check is
    made before anything is read; nothing is written here."""
    loc = parse_url(url)
    acc = access(folder, endpoint, profile, anonymous)
    c = client(folder, acc)
    listing = list_objects(folder, c, loc, acc, include)
    if not listing.objects:
        what = "match --include" if include else "of a type openkl reads"
        if listing.keys and not listing.skipped:
            raise BadInput(
                f"no object under {loc.url} {what} ({len(listing.keys)} other"
                f"{'' if len(listing.keys) == 1 else 's'})",
                "pass --include '*.ext' for other file types",
            )
        if not listing.keys:
            raise NotFound(
                f"no object under {loc.url} on {acc.where()}",
                "check the prefix (keys are case-sensitive)",
            )
    batch = Batch(skipped=list(listing.skipped))
    base = _base_info(loc, acc, include)
    stored = _stored(folder, acc)
    for obj in listing.objects:
        src = source_of(loc, obj.key, acc)
        have = stored.get(loc.object_url(obj.key))
        fetch: FetchInfo = (have.get("fetch") or {}) if have is not None else {}
        if have is not None and have.get("source") == src and fetch.get("etag") == obj.etag:
            # stored already, and the object has not changed since: not read again
            url = loc.object_url(obj.key)
            batch.kept.append(({"id": have["id"], "path": have["path"], "origin": url}, src))
            batch.fetch[url] = {**fetch, **base, "etag": obj.etag}
            continue
        _candidate(folder, c, loc, obj, acc, batch, base)
    return batch


def _stored(folder: Folder, acc: Access) -> dict[str, MappingEntry]:
    """The current document of each object of this store whose text is on disk, by URL."""
    out: dict[str, MappingEntry] = {}
    for e in mapping_mod.load(folder).values():
        src = e.get("source") or {}
        if (
            e.get("current", True)
            and src.get("s3")
            and src.get("endpoint") == acc.endpoint
            and (folder.root / e["path"]).is_file()
        ):
            out[str(src["s3"])] = e
    return out


# -- refresh ----------------------------------------------------------------------------------
@dataclass
class Refreshed:
    """What a refresh of one prefix found: candidates to ingest (changed and new objects),
    documents whose ETag is unchanged, documents whose object is gone, and the rest."""

    batch: Batch = field(default_factory=Batch)
    owners: dict[str, str] = field(default_factory=dict)  # origin -> the doc it refreshes
    not_modified: dict[str, FetchInfo] = field(default_factory=dict)
    removed: list[MappingEntry] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (doc id, reason)


def group_key(e: MappingEntry) -> tuple[str, str, str, bool]:
    """Documents refreshed together: one listing of (prefix, endpoint, profile, unsigned)."""
    src, fetch = e.get("source") or {}, e.get("fetch") or {}
    return (
        str(fetch.get("prefix") or src.get("s3") or ""),
        str(src.get("endpoint") or ""),
        str(fetch.get("profile") or ""),
        bool(fetch.get("anonymous")),
    )


def refresh_prefix(
    folder: Folder,
    members: list[MappingEntry],
    entries: dict[str, MappingEntry],
) -> Refreshed:
    """Refresh the documents of one prefix (`group_key`): list it once, download only what
    changed or is new. An error before any object is read (listing, credentials) raises."""
    prefix, endpoint, profile, anonymous = group_key(members[0])
    loc = parse_url(prefix)
    # the store the documents came from ("" for AWS S3, whatever s3.endpoint_url says now)
    acc = access(folder, endpoint, profile or None, anonymous)
    globs = [(m.get("fetch") or {}).get("include") or [] for m in members]
    include = sorted({g for gs in globs for g in gs}) if all(globs) else None
    c = client(folder, acc)
    listing = list_objects(folder, c, loc, acc, include)
    out = Refreshed()  # an object over the size limit is no failure: it is skipped below
    member_ids = {m["id"] for m in members}
    # the current document of each object of this store
    have: dict[str, MappingEntry] = {}
    for e in entries.values():
        src = e.get("source") or {}
        if e.get("current", True) and src.get("s3") and str(src.get("endpoint") or "") == endpoint:
            have[str(src["s3"])] = e
    policies = [m.get("refresh") for m in members if m.get("refresh")]
    policy: RefreshPolicy | None = policies[0] if policies else None
    base = _base_info(loc, acc, include)
    listed = {loc.object_url(o.key) for o in listing.objects}
    for obj in listing.objects:
        url = loc.object_url(obj.key)
        doc = have.get(url)
        if doc is not None and doc["id"] not in member_ids:
            continue  # stored, but not among the documents asked for
        fetch: FetchInfo = (doc.get("fetch") or {}) if doc is not None else {}
        if doc is not None and fetch.get("etag") and fetch.get("etag") == obj.etag:
            out.not_modified[doc["id"]] = {**fetch, **base, "etag": obj.etag}
            continue
        if doc is not None:  # before the download: a failed one is this document's failure
            out.owners[url] = doc["id"]
        cand = _candidate(folder, c, loc, obj, acc, out.batch, base)
        if cand is not None and doc is None and policy:
            out.batch.policies[cand.origin] = policy
    # gone: not even under the prefix as a string (an object named `docs` beside docs/…
    # changes what s3://bucket/docs names, not what is stored)
    all_keys = {loc.object_url(k) for k in listing.present}
    for m in members:
        url = str((m.get("source") or {}).get("s3") or "")
        if url in listed:
            continue
        if url not in all_keys:
            out.removed.append(m)
        else:
            out.skipped.append(
                (m["id"], "not re-read (outside --include, or over ingest.max_file_mb)")
            )
    return out
