"""NodeClient.open_file against a stand-in Engine API that answers as Docker's does (a stat
header in Go's FileMode, a tar of the path's last part, the folders above it followed): a
file is what the Engine says it is, never what a tenant's container says; a folder, a symbolic
link (last, or among the folders) or anything but a regular file is refused before a byte of
it is read; a file streams a chunk at a time and stops at the limit."""

import base64
import json
import tarfile
from collections.abc import Iterator

import pytest
import requests
from docker.errors import NotFound

from apps.nodes.client import CHUNK, PATH_STAT, NodeClient
from apps.nodes.engine import Address
from apps.nodes.errors import NodeMissing, NotAFile

NODE = Address("lab-1", "unix:///nowhere")
DIR, LINK = 1 << 31, 1 << 27  # Go's os.ModeDir, os.ModeSymlink


class Engine:
    """A container's file system as {path: ("dir", None) | ("file", size) | ("link", target)}:
    HEAD and GET /containers/<id>/archive as the Engine answers them. A file's bytes are made
    as they are sent, and counted."""

    def __init__(self, tree: dict[str, tuple[str, object]]) -> None:
        self.tree = {"/": ("dir", None), **tree}
        self.calls: list[tuple[str, str]] = []
        self.sent = 0  # bytes of archive handed out
        self.closed = False

    def resolve(self, path: str) -> str:
        """The folders above the last part followed (inside the container), as Docker does."""
        *folders, last = path.strip("/").split("/")
        where = ""
        for part in folders:
            where = f"{where}/{part}"
            kind, target = self.tree.get(where, ("missing", None))
            while kind == "link":
                where = str(target)
                kind, target = self.tree.get(where, ("missing", None))
        return f"{where}/{last}"

    def stat(self, path: str) -> dict:
        found = self.resolve(path)
        if found not in self.tree:
            raise NotFound("Could not find the file", response(404))
        kind, value = self.tree[found]
        mode = {"dir": DIR | 0o755, "file": 0o644, "link": LINK | 0o777}[kind]
        size = value if kind == "file" else 0
        target = value if kind == "link" else ""
        return {"name": found.rsplit("/", 1)[-1], "size": size, "mode": mode, "linkTarget": target}

    # -- what NodeClient calls
    timeout = 60

    def _url(self, template: str, container: str) -> str:
        return template.format(container)

    def head(self, url: str, params: dict, timeout: int) -> requests.Response:
        self.calls.append(("head", params["path"]))
        answer = response(200)
        stat = json.dumps(self.stat(params["path"])).encode()
        answer.headers[PATH_STAT] = base64.b64encode(stat).decode()  # as the Engine sends it
        return answer

    def _raise_for_status(self, answer: requests.Response) -> None:
        pass

    def get_archive(self, container: str, path: str, chunk_size: int) -> tuple[Iterator, dict]:
        self.calls.append(("get_archive", path))
        stat = self.stat(path)
        kind, value = self.tree[self.resolve(path)]
        return self._archive(stat["name"], kind, value, chunk_size), stat

    def _archive(self, name: str, kind: str, value, chunk_size: int) -> Iterator[bytes]:
        entry = tarfile.TarInfo(name)
        if kind == "dir":
            entry.type = tarfile.DIRTYPE
        elif kind == "link":
            entry.type, entry.linkname = tarfile.SYMTYPE, str(value)
        else:
            entry.size = int(value)
        try:
            yield from self._counted(entry.tobuf(format=tarfile.PAX_FORMAT))
            left = entry.size
            while left > 0:  # the file's bytes, made as they are sent
                part = min(chunk_size, left)
                left -= part
                yield from self._counted(b"z" * part)
            yield from self._counted(b"\0" * (-entry.size % 512 + 1024))
        finally:
            self.closed = True

    def _counted(self, data: bytes) -> Iterator[bytes]:
        self.sent += len(data)
        yield data


def response(status_code: int) -> requests.Response:
    answer = requests.Response()
    answer.status_code = status_code
    return answer


def use(monkeypatch, tree: dict) -> Engine:
    engine = Engine(tree)
    monkeypatch.setattr(NodeClient, "_api", property(lambda self: engine))
    return engine


FOLDERS = {
    "/tmp": ("dir", None),
    "/tmp/platter-jobs": ("dir", None),
    "/tmp/platter-jobs/7": ("dir", None),
    "/tmp/platter-jobs/7/out": ("dir", None),
}
OUT = "/tmp/platter-jobs/7/out"


def test_a_file_streams_a_chunk_at_a_time_and_stops_at_the_limit(monkeypatch):
    size, limit = 40 * CHUNK, 3 * CHUNK + 5
    engine = use(monkeypatch, {**FOLDERS, f"{OUT}/big": ("file", size)})
    found = NodeClient(NODE).open_file("c", f"{OUT}/big", limit)
    assert found.size == size
    assert engine.sent < 2 * CHUNK, "only the archive's header is read before the body"
    parts = list(found.chunks)
    assert [len(p) for p in parts] == [CHUNK, CHUNK, CHUNK, 5]
    assert b"".join(parts) == b"z" * limit
    assert engine.sent <= limit + 2 * CHUNK, "the rest of the file is never read"
    assert engine.closed, "the Engine's answer is closed at the limit"
    looked = [path for call, path in engine.calls if call == "head"]
    assert looked == ["/tmp", "/tmp/platter-jobs", "/tmp/platter-jobs/7", OUT]


def test_a_small_file_comes_whole(monkeypatch):
    use(monkeypatch, {**FOLDERS, f"{OUT}/a.txt": ("file", 10)})
    found = NodeClient(NODE).open_file("c", f"{OUT}/a.txt", 1000)
    assert (found.size, b"".join(found.chunks)) == (10, b"z" * 10)


def test_a_folder_is_refused_without_reading_it(monkeypatch):
    engine = use(monkeypatch, {**FOLDERS, f"{OUT}/sub": ("dir", None)})
    with pytest.raises(NotAFile) as refused:
        NodeClient(NODE).open_file("c", f"{OUT}/sub", 1000)
    assert (refused.value.path, refused.value.kind) == (f"{OUT}/sub", "a folder")
    assert engine.closed or engine.sent == 0


def test_a_symbolic_link_is_refused_not_followed(monkeypatch):
    engine = use(
        monkeypatch,
        {**FOLDERS, "/etc/shadow": ("file", 100), f"{OUT}/shadow": ("link", "/etc/shadow")},
    )
    with pytest.raises(NotAFile) as refused:
        NodeClient(NODE).open_file("c", f"{OUT}/shadow", 1000)
    assert refused.value.kind == "a symbolic link"
    assert engine.sent <= 1024, "the link's target is never sent"


def test_a_symbolic_link_among_the_folders_is_refused_before_any_read(monkeypatch):
    """The Engine itself would follow it: `out/disk/secret` read through a link to another
    mount's folder would come back as a plain file."""
    engine = use(
        monkeypatch,
        {
            **FOLDERS,
            "/data/2": ("dir", None),
            "/data/2/secret": ("file", 100),
            f"{OUT}/disk": ("link", "/data/2"),
        },
    )
    with pytest.raises(NotAFile) as refused:
        NodeClient(NODE).open_file("c", f"{OUT}/disk/secret", 1000)
    assert (refused.value.path, refused.value.kind) == (f"{OUT}/disk", "a symbolic link")
    assert not [call for call in engine.calls if call[0] == "get_archive"]


def test_an_archive_that_does_not_hold_a_regular_file_is_refused(monkeypatch):
    """The stat says a file, its archive a link: either saying so is enough to refuse."""
    engine = use(monkeypatch, {**FOLDERS, f"{OUT}/x": ("link", "/etc/shadow")})
    real_stat = engine.stat
    lying = {f"{OUT}/x"}
    monkeypatch.setattr(
        engine,
        "stat",
        lambda path: {**real_stat(path), "mode": 0o644} if path in lying else real_stat(path),
    )
    with pytest.raises(NotAFile) as refused:
        NodeClient(NODE).open_file("c", f"{OUT}/x", 1000)
    assert refused.value.kind == "not a regular file in its archive"


def test_nothing_there_is_missing(monkeypatch):
    use(monkeypatch, FOLDERS)
    with pytest.raises(NodeMissing):
        NodeClient(NODE).open_file("c", f"{OUT}/nope", 1000)


@pytest.mark.parametrize("path", ["relative/x", "/tmp/../etc/shadow", "/tmp/./x"])
def test_a_path_that_is_not_plain_is_a_bug_of_the_caller(monkeypatch, path):
    engine = use(monkeypatch, FOLDERS)
    with pytest.raises(ValueError):
        NodeClient(NODE).open_file("c", path, 1000)
    assert engine.calls == []
