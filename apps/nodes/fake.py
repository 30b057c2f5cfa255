"""In-memory nodes for unit tests of code above the node layer.

    with FakeNodes() as nodes:
        nodes.down("lab-2")                      # every call to lab-2 raises NodeUnreachable
        nodes.fail("exec", NodeRefused("lab-1", "no"))  # the next exec anywhere raises it
        ...                                      # code under test calls apps.nodes.client(node)
        assert nodes.running("lab-1") == [...]

Tests of the real thing run against the lab's dockerds; this fake only stands in where a test
is about the logic above the nodes (retries, state changes, releases).
"""

import itertools
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import cast

from django.conf import settings

from portal import streams

from .client import CHUNK, FileRead, NodeClient, installed
from .engine import Endpoint
from .errors import NodeError, NodeMissing, NodeUnreachable, NotAFile
from .specs import ContainerSpec


@dataclass
class FakeContainer:
    id: str
    name: str
    labels: dict[str, str]
    state: str = "created"
    created: float = field(default_factory=time.time)
    log: str = ""
    spec: ContainerSpec | None = None
    limits: dict | None = None  # set by update_limits (a live change), else the spec's


@dataclass
class BigFile:
    """A file of `size` bytes (`pattern` over and over) made only as it is read: `made` counts
    the bytes handed out, so a test sees how much of it a reader took."""

    size: int
    pattern: bytes = b"x"
    made: int = 0

    def read(self, count: int) -> bytes:
        count = min(count, self.size - self.made)
        start = self.made % len(self.pattern)
        whole = self.pattern * ((start + count) // len(self.pattern) + 1)
        self.made += count
        return whole[start : start + count]

    def chunks(self, limit: int) -> Iterator[bytes]:
        while self.made < limit:
            yield self.read(min(CHUNK, limit - self.made))


class FakeNodes:
    """The state of every fake node; installed as the node layer's factory while in use."""

    def __init__(self) -> None:
        self.containers: dict[str, dict[str, FakeContainer]] = {}
        self.unreachable: set[str] = set()
        self.failures: dict[str, list[Exception]] = {}
        self.calls: list[tuple[str, str, str]] = []  # (node, method, target)
        # An exec's (exit code, output) by its program's name, or a function of its argv.
        self.exec_results: dict[str, tuple[int, str] | Callable[[list[str]], tuple[int, str]]]
        self.exec_results = {}
        self.execs: list[list[str]] = []  # every exec's argv, in order
        # Files written by put_files: (node, path) -> content. A started exec ends at once
        # with program's exit code, having written program's output to the file read_file
        # reads (any path ending in ".log"); an exit code of None: it is still running, and
        # has written that much so far.
        self.files: dict[tuple[str, str], bytes | BigFile] = {}
        # Paths that are there but are not regular files: (node, path) -> "a folder", "a
        # symbolic link", ... as NodeClient.open_file names them.
        self.kinds: dict[tuple[str, str], str] = {}
        self.started: list[list[str]] = []
        self.program: tuple[int | None, bytes] = (0, b"")
        # Called while a helper container runs (it is listed on its node meanwhile), e.g. a
        # reconcile pass in the middle of a long wipe.
        self.during_helper: Callable[[], object] | None = None
        # Each node's firewall: the last nft script loaded (set_firewall), as the node holds it.
        self.firewalls: dict[str, str] = {}
        self._ids = itertools.count(1)
        self._installed: AbstractContextManager[None] | None = None

    def __enter__(self) -> "FakeNodes":
        # Duck-typed: FakeNodeClient has the methods of NodeClient that the code calls.
        self._installed = installed(lambda node: cast(NodeClient, FakeNodeClient(self, node)))
        self._installed.__enter__()
        return self

    def __exit__(self, *exc_info) -> None:
        if self._installed is not None:
            self._installed.__exit__(*exc_info)

    def down(self, node: str) -> None:
        self.unreachable.add(node)

    def up(self, node: str) -> None:
        self.unreachable.discard(node)

    def fail(self, method: str, error: Exception) -> None:
        """The next call of `method` (on any node) raises `error`."""
        self.failures.setdefault(method, []).append(error)

    def on(self, node: str) -> dict[str, FakeContainer]:
        return self.containers.setdefault(node, {})

    def running(self, node: str) -> list[str]:
        return sorted(c.name for c in self.on(node).values() if c.state == "running")

    def names(self, node: str) -> list[str]:
        return sorted(self.on(node))


class FakeNodeClient:
    """NodeClient's methods over FakeNodes' state."""

    def __init__(self, nodes: FakeNodes, node: Endpoint) -> None:
        self.nodes, self.node, self.name = nodes, node, node.name

    def _enter(self, method: str, target: str = "") -> dict[str, FakeContainer]:
        self.nodes.calls.append((self.name, method, target))
        if self.name in self.nodes.unreachable:
            raise NodeUnreachable(self.name, f"{method}: did not answer (fake node down)")
        queued = self.nodes.failures.get(method)
        if queued:
            raise queued.pop(0)
        return self.nodes.on(self.name)

    def _get(self, method: str, name: str) -> FakeContainer:
        on_node = self._enter(method, name)
        found = on_node.get(name) or next((c for c in on_node.values() if c.id == name), None)
        if found is None:
            raise NodeMissing(self.name, f"{method} {name}: No such container")
        return found

    def forget(self) -> None:
        pass

    def ping(self) -> None:
        self._enter("ping")

    def inspect(self, name: str) -> dict | None:
        found = self._enter("inspect", name).get(name)
        if found is None:
            return None
        return {
            "Id": found.id,
            "State": {"Status": found.state, "Running": found.state == "running"},
            "Config": {"Labels": found.labels},
        }

    def container_state(self, name: str) -> str | None:
        info = self.inspect(name)
        return info["State"]["Status"] if info else None

    def containers(self, labels: dict[str, str]) -> list[dict]:
        found = self._enter("containers").values()
        return [
            {
                "Id": c.id,
                "Names": [f"/{c.name}"],
                "Labels": c.labels,
                "State": c.state,
                "Status": c.state,
                "Created": c.created,
            }
            for c in found
            if all(c.labels.get(k) == v for k, v in labels.items())
        ]

    def ensure_running(self, spec: ContainerSpec) -> tuple[str, float]:
        on_node = self._enter("ensure_running", spec.name)
        found = on_node.get(spec.name)
        labels = {**spec.labels, "platter.fingerprint": spec.fingerprint()}
        if found is None or found.labels != labels:
            found = FakeContainer(f"fake{next(self.nodes._ids)}", spec.name, labels, spec=spec)
            on_node[spec.name] = found
        found.state = "running"
        return found.id, 0.0

    def start(self, name: str) -> None:
        self._get("start", name).state = "running"

    def stop(self, name: str, timeout: int | None = None) -> None:
        found = self._enter("stop", name).get(name)
        if found is not None:
            found.state = "exited"

    def remove(self, name: str) -> None:
        on_node = self._enter("remove", name)
        found = (
            name if name in on_node else next((k for k, c in on_node.items() if c.id == name), "")
        )
        on_node.pop(found, None)  # by name or id, as Docker takes either

    def kill(self, name: str, signal: str = "KILL") -> None:
        self._get("kill", name).state = "exited"

    def update_limits(self, name: str, cores: int, memory_mb: int | None = None) -> None:
        found = self._get("update_limits", name)
        found.limits = {"cores": cores, "memory_mb": memory_mb}

    def exec(self, container: str, argv: list[str], timeout: float) -> tuple[int, str]:
        found = self._get("exec", container)
        if found.state != "running":
            raise NodeError(self.name, f"exec in {container}: container is not running")
        self.nodes.execs.append(list(argv))
        result = self.nodes.exec_results.get(argv[0], (0, ""))
        return result(list(argv)) if callable(result) else result

    def put_files(self, container: str, folder: str, files: dict[str, bytes]) -> None:
        self._get("put_files", container)
        for name, content in files.items():
            self.nodes.files[(self.name, f"{folder}/{name}")] = content

    def start_exec(
        self, container: str, argv: list[str], environment: dict[str, str] | None = None
    ) -> str:
        self._get("start_exec", container)
        self.nodes.started.append(argv)
        return f"exec{len(self.nodes.started)}"

    def exec_status(self, exec_id: str) -> int | None:
        self._enter("exec_status", exec_id)
        return self.nodes.program[0]

    def read_file(self, container: str, path: str, offset: int, limit: int) -> bytes:
        self._get("read_file", container)
        output = self.nodes.program[1] if path.endswith(".log") else b""
        return output[offset : offset + limit]

    def get_file(self, container: str, path: str, limit: int) -> tuple[int, bytes | None]:
        self._get("get_file", container)
        content = self.nodes.files.get((self.name, path))
        if content is None:
            raise NodeMissing(self.name, f"no file {path}")
        if isinstance(content, BigFile):
            return content.size, None if content.size > limit else content.read(content.size)
        return len(content), content if len(content) <= limit else None

    def open_file(self, container: str, path: str, limit: int) -> FileRead:
        """As NodeClient.open_file: the folders above the path are folders unless `kinds`
        says otherwise; a BigFile is made as it is read, in CHUNKs."""
        self._get("open_file", container)
        parts = path.split("/")
        for depth in range(2, len(parts) + 1):
            above = "/".join(parts[:depth])
            kind = self.nodes.kinds.get((self.name, above))
            if kind is not None:
                raise NotAFile(self.name, above, kind)
        content = self.nodes.files.get((self.name, path))
        if content is None:
            raise NodeMissing(self.name, f"no file {path}")
        if isinstance(content, bytes):
            content = BigFile(len(content), content)
        return FileRead(content.size, content.chunks(min(content.size, limit)))

    def logs(self, container: str, tail: int, **options) -> str:
        return "\n".join(self._get("logs", container).log.splitlines()[-tail:])

    def follow_logs(self, container: str, tail: int, seconds: float, **options) -> Iterator[str]:
        yield self.logs(container, tail)

    def follow_logs_async(self, container: str, tail: int, seconds: float, **options):
        return streams.in_thread(self.follow_logs(container, tail, seconds, **options))

    def run_helper(self, command: list[str], binds: list[str], *args, **options) -> tuple[int, str]:
        on_node = self._enter("run_helper", " ".join(command))
        name = f"platter-helper-{next(self.nodes._ids)}"
        labels = {"platter.site": settings.PLATTER_SITE, "platter.helper": "1"}
        on_node[name] = FakeContainer(
            name, name, {**labels, **(options.get("labels") or {})}, state="running"
        )
        if self.nodes.during_helper is not None:
            self.nodes.during_helper()
        if on_node.pop(name, None) is None:  # removed while it ran, as Docker's wait says
            return 137, ""
        return 0, ""

    def set_firewall(self, script: str) -> None:
        self._enter("set_firewall", script.split("\n", 1)[0])
        self.nodes.firewalls[self.name] = script

    def images(self) -> list[str]:
        self._enter("images")
        return []

    def has_image(self, image: str) -> bool:
        self._enter("has_image", image)
        return True

    def ensure_image(self, image: str) -> None:
        self._enter("ensure_image", image)

    def ensure_network(self, name: str, subnet: str, gateway: str, parent: str) -> None:
        self._enter("ensure_network", name)
