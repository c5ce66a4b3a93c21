"""Pure pieces of the server, table-driven: upload-mode choice, byte ranges, fault matching,
token-leak scanning, commit operations and tree listings."""

from __future__ import annotations

import pytest
from hubserver.auth import Principal, TokenGrant, TokenRole, TokenTable
from hubserver.errors import HubError
from hubserver.faults import FaultTable
from hubserver.http_io import parse_range
from hubserver.repos import (
    AddFile,
    CommitRecord,
    DeleteFile,
    DeleteFolder,
    FileEntry,
    Operation,
    apply_operations,
)
from hubserver.reqlog import LeakScanner
from hubserver.routes_content import upload_mode
from hubserver.wire import tree_listing

MIB = 1024 * 1024


@pytest.mark.parametrize(
    ("size", "sample", "expected"),
    [
        (5, b"hello", "regular"),
        (10 * MIB - 1, b"text", "regular"),
        (10 * MIB, b"text", "lfs"),
        (100, b"ab\x00cd", "lfs"),
    ],
)
def test_upload_mode(size: int, sample: bytes, expected: str) -> None:
    assert upload_mode(size, sample, 10 * MIB) == expected


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        (None, None),
        ("bytes=2-5", (2, 4)),
        ("bytes=7-", (7, 3)),
        ("bytes=-4", (6, 4)),
        ("bytes=8-100", (8, 2)),
        ("bytes=0-1,4-5", None),  # multi-range: whole file
    ],
)
def test_parse_range(header: str | None, expected: tuple[int, int] | None) -> None:
    assert parse_range(header, 10) == expected


def test_parse_range_beyond_the_end_is_416() -> None:
    with pytest.raises(HubError) as excinfo:
        parse_range("bytes=10-", 10)
    assert excinfo.value.status == 416


def test_fault_rules_match_method_and_path_and_count_down() -> None:
    table = FaultTable()
    table.add({"kind": "status", "method": "POST", "path": "/commit/", "status": 502, "count": 2})
    table.add({"kind": "delay", "path": "/commit/", "delay_s": 0.5, "count": 1})

    decisions = [
        table.decide("GET", "/api/models/a/b/commit/main"),
        table.decide("POST", "/api/models/a/b/preupload/main"),
        table.decide("POST", "/api/models/a/b/commit/main"),
        table.decide("POST", "/api/models/a/b/commit/main"),
    ]

    assert [(d.status, d.close, d.delay_s) for d in decisions] == [
        (None, False, 0.5),  # the delay rule has no method filter
        (None, False, 0.0),
        (502, False, 0.0),
        (502, False, 0.0),
    ]
    assert table.decide("POST", "/api/models/a/b/commit/main").status is None
    assert table.rules() == []


def test_down_and_close_rules() -> None:
    table = FaultTable()
    down = table.add({"kind": "down", "path": "^/api/"})
    table.add({"kind": "close", "path": "/resolve/"})

    assert table.decide("GET", "/api/whoami-v2").status == 503
    assert table.decide("GET", "/api/whoami-v2").status == 503
    assert table.decide("GET", "/a/b/resolve/main/x").close is True
    assert table.decide("GET", "/a/b/resolve/main/x").close is False
    table.remove(down.id)
    assert table.decide("GET", "/api/whoami-v2").status is None


@pytest.mark.parametrize(
    "rule", [{"kind": "boom"}, {"kind": "status", "count": 0}, {"kind": "status", "path": "("}]
)
def test_invalid_fault_rules_are_refused(rule: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        FaultTable().add(rule)


@pytest.mark.parametrize(
    ("chunks", "found"),
    [
        ([b"nothing to see"], False),
        ([b"xx hf_secret yy"], True),
        ([b"xx hf_se", b"cret yy"], True),  # split across chunks
        ([b"hf_secre", b"t"], True),
        ([b"hf_secre", b"x", b"t"], False),
    ],
)
def test_leak_scanner(chunks: list[bytes], found: bool) -> None:
    scanner = LeakScanner(["hf_secret", ""])
    for chunk in chunks:
        scanner.feed(chunk)
    assert scanner.found is found


@pytest.mark.parametrize(
    ("header", "user", "status"),
    [
        (None, None, None),
        ("Bearer good", "alice", None),
        ("Bearer bad", None, 401),
        ("Basic xyz", None, 401),
    ],
)
def test_authenticate(header: str | None, user: str | None, status: int | None) -> None:
    table = TokenTable({"good": TokenGrant("alice", TokenRole.WRITE)})
    if status is None:
        assert table.authenticate(header).user == user
    else:
        with pytest.raises(HubError) as excinfo:
            table.authenticate(header)
        assert excinfo.value.status == status


@pytest.mark.parametrize(
    ("principal", "namespace", "status"),
    [
        (Principal("alice", TokenRole.WRITE), "alice", None),
        (Principal("alice", TokenRole.WRITE, ("org",)), "org", None),
        (Principal("alice", TokenRole.READ), "alice", 403),
        (Principal("alice", TokenRole.WRITE), "bob", 403),
        (Principal(), "alice", 401),
    ],
)
def test_check_write(principal: Principal, namespace: str, status: int | None) -> None:
    if status is None:
        principal.check_write(namespace)
    else:
        with pytest.raises(HubError) as excinfo:
            principal.check_write(namespace)
        assert excinfo.value.status == status


def _entry(size: int = 1) -> FileEntry:
    return FileEntry(size=size, git_oid="0" * 40, sha256="1" * 64, lfs=False)


FILES = {"a.txt": _entry(), "d/b.txt": _entry(), "d/e/c.txt": _entry(3)}


@pytest.mark.parametrize(
    ("operations", "expected"),
    [
        ([AddFile("new.txt", _entry())], {"a.txt", "d/b.txt", "d/e/c.txt", "new.txt"}),
        ([DeleteFile("a.txt")], {"d/b.txt", "d/e/c.txt"}),
        ([DeleteFolder("d")], {"a.txt"}),
        ([DeleteFolder("d"), AddFile("d/x", _entry())], {"a.txt", "d/x"}),
    ],
)
def test_apply_operations(operations: list[Operation], expected: set[str]) -> None:
    assert set(apply_operations(FILES, operations, "c" * 40)) == expected


@pytest.mark.parametrize(
    "operation", [DeleteFile("nope.txt"), DeleteFile("d"), DeleteFolder("a.txt")]
)
def test_deleting_what_is_not_there_is_entry_not_found(operation: Operation) -> None:
    with pytest.raises(HubError) as excinfo:
        apply_operations(FILES, [operation], "c" * 40)
    assert (excinfo.value.status, excinfo.value.error_code) == (404, "EntryNotFound")


@pytest.mark.parametrize(
    ("path", "recursive", "expected"),
    [
        ("", False, ["a.txt", "d"]),
        ("", True, ["a.txt", "d", "d/b.txt", "d/e", "d/e/c.txt"]),
        ("d", False, ["d/b.txt", "d/e"]),
        ("d/e", True, ["d/e/c.txt"]),
    ],
)
def test_tree_listing(path: str, recursive: bool, expected: list[str]) -> None:
    commit = CommitRecord("c" * 40, None, "t", "", "alice", "2024-01-01T00:00:00Z", FILES)
    assert [e["path"] for e in tree_listing(commit, path, recursive)] == expected


def test_tree_listing_of_a_missing_folder_is_entry_not_found() -> None:
    commit = CommitRecord("c" * 40, None, "t", "", "alice", "2024-01-01T00:00:00Z", FILES)
    with pytest.raises(HubError) as excinfo:
        tree_listing(commit, "a.txt", False)
    assert excinfo.value.error_code == "EntryNotFound"
