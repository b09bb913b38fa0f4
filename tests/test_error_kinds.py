"""Every kind of error says once how each adapter reports it: an exit code for the CLI
and an HTTP status for the API, read from the class, so the three adapters agree."""

from __future__ import annotations

import importlib
import pkgutil

import openkl
from openkl.errors import ERROR, NOTHING_FOUND, PARTIAL, OkError
from openkl.server.failures import status_of


def every_kind() -> list[type[OkError]]:
    for m in pkgutil.walk_packages(openkl.__path__, "openkl."):
        importlib.import_module(m.name)
    out: list[type[OkError]] = []
    todo: list[type[OkError]] = [OkError]
    while todo:
        cls = todo.pop()
        out.append(cls)
        todo.extend(cls.__subclasses__())
    return out


def test_every_kind_has_an_exit_code_and_an_http_status() -> None:
    kinds = every_kind()
    assert len(kinds) > 25  # the walk reached the adapters' own kinds too
    for cls in kinds:
        assert cls.exit_code in (NOTHING_FOUND, ERROR, PARTIAL), cls
        assert 400 <= cls.http_status <= 599, cls
        assert status_of(cls.__new__(cls)) == cls.http_status


def test_the_statuses_the_api_documents() -> None:
    by_name = {cls.__name__: cls.http_status for cls in every_kind()}
    assert by_name["NotFound"] == 404
    assert by_name["Duplicate"] == 409  # a BadInput, but a conflict with what is there
    assert by_name["BadInput"] == 400
    assert by_name["Served"] == 503  # as the LockBusy it is
    assert by_name["Unauthorized"] == 401
    assert by_name["Forbidden"] == 403
    assert by_name["RateLimited"] == 429
    assert by_name["TimedOut"] == 504
    assert by_name["QueryTooLarge"] == 422
