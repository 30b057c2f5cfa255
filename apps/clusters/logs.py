"""Container logs of a cluster's instances: the last lines, the lines written after a cursor
(the web panel follows by asking for those every few seconds), and a live stream that ends by
itself (the API's follow).

A cursor is the Docker timestamp of the last line a reader has, e.g.
"2026-11-24T17:03:02.294010202Z". Docker's own `since` counts whole microseconds at best and
includes the line at that instant, so lines are asked from just before the cursor and those
not after it are dropped here.
"""

import re
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime

from apps import nodes
from apps.inventory.models import Node
from apps.nodes import NodeError, NodeMissing

from .container_specs import container_name
from .models import Cluster, Instance
from .states import ENDED, Containers, with_containers

TAIL_DEFAULT = 100
TAIL_MAX = 10_000
FOLLOW_SECONDS_DEFAULT = 60
FOLLOW_SECONDS_MAX = 300  # a follow always ends by itself (and at settings.STREAM_DEADLINE)
# A followed line longer than this is cut (saying so): a container that writes no newline
# must not grow the portal's memory.
LINE_MAX = 64 * 1024

CURSOR = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d{1,9}))?Z$")
S = Cluster.State


class UnknownInstance(ValueError):
    """The cluster has no instance of that name; the message lists the ones it has."""


class NoContainer(Exception):
    """The instance has no container to read: not made yet, or gone. The message says which
    and why, in words a user can act on."""


class BadCursor(ValueError):
    """Not a Docker log timestamp."""


@dataclass(frozen=True)
class LogSource:
    """Where an instance's log is: its node and container (by id, else by its fixed name)."""

    cluster: Cluster
    instance: Instance
    container: str

    @property
    def node(self) -> Node:
        if self.instance.node is None:  # an instance's row is placed before its container
            raise UnknownInstance(f"{self.instance.hostname} is on no node yet")
        return self.instance.node


@dataclass
class LogLines:
    """Lines of a log, each with its Docker timestamp, and the cursor after the last one."""

    entries: list[tuple[str, str]] = field(default_factory=list)
    cursor: str | None = None

    def text(self, timestamps: bool = False) -> str:
        return "".join(
            f"{at} {line}\n" if timestamps and at else f"{line}\n" for at, line in self.entries
        )


def normal_cursor(cursor: str) -> str:
    """The cursor with nine fractional digits (as Docker writes them, so cursors compare as
    strings); BadCursor when it is not a timestamp like 2026-11-24T17:03:02.294010202Z."""
    match = CURSOR.match(cursor)
    if not match:
        raise BadCursor(f"{cursor!r} is not a log timestamp such as 2026-11-24T17:03:02.294010202Z")
    return f"{match[1]}.{(match[2] or '').ljust(9, '0')}Z"


def _since(cursor: str) -> float:
    """Docker `since` (seconds) a microsecond before the cursor: a float holds 1.7e9 s only
    to about 0.2 us, so the line at the cursor must be dropped by comparison, not by Docker."""
    base, fraction = cursor[:-1].split(".")
    seconds = datetime.strptime(base, "%Y-%m-%dT%H:%M:%S").replace(tzinfo=UTC).timestamp()
    return seconds + int(fraction) // 1000 / 1e6 - 1e-6


def _entry(line: str) -> tuple[str, str]:
    """(timestamp, text) of one line Docker wrote with timestamps on."""
    at, _, text = line.partition(" ")
    return (normal_cursor(at), text) if CURSOR.match(at) else ("", line)


def instance_of(cluster: Cluster, hostname: str | None) -> Instance:
    """The cluster's instance of that hostname; without one, its first (the master)."""
    instances = list(cluster.instances.select_related("node").order_by("role", "index"))
    if not instances:
        raise UnknownInstance(f"cluster {cluster.name} has no instances")
    if not hostname:
        return instances[0]
    for instance in instances:
        if instance.hostname == hostname:
            return instance
    names = ", ".join(i.hostname for i in instances)
    raise UnknownInstance(f"cluster {cluster.name} has no instance {hostname!r}; it has {names}")


def _not_yet(cluster: Cluster, instance: Instance) -> str:
    if cluster.state == S.QUEUED:
        why = f" ({cluster.reason})" if cluster.reason else ""
        return f"{instance.hostname} has no container yet: the cluster is queued{why}."
    if cluster.state in ENDED:
        return f"{instance.hostname} has no container: the cluster is {cluster.state}."
    return (
        f"{instance.hostname} has no container yet: the cluster is {cluster.state}; its log "
        "starts with the container."
    )


def _gone(source: LogSource) -> str:
    cluster, instance = source.cluster, source.instance
    if cluster.state in with_containers(Containers.NOT_YET) or not instance.container_id:
        return _not_yet(cluster, instance)
    if cluster.state in with_containers(Containers.GONE):
        return (
            f"The container of {instance.hostname} no longer exists: the cluster is "
            f"{cluster.state}."
        )
    return (
        f"The container of {instance.hostname} is no longer on node {source.node.name}; the "
        "reconciler marks the instance lost."
    )


def source(cluster: Cluster, hostname: str | None) -> LogSource:
    """Where to read the log of the named instance (UnknownInstance, NoContainer)."""
    instance = instance_of(cluster, hostname)
    if instance.node is None:
        raise NoContainer(_not_yet(cluster, instance))
    name = container_name(cluster.id, instance.role, instance.index)
    return LogSource(cluster, instance, instance.container_id or name)


def read(source: LogSource, tail: int, after: str | None = None) -> LogLines:
    """The last `tail` lines, or of those only the ones written after the cursor `after`.
    NoContainer when the node has no such container; NodeError when the node fails."""
    after = normal_cursor(after) if after else None
    since = _since(after) if after else None
    try:
        raw = nodes.client(source.node).logs(source.container, tail, since=since, timestamps=True)
    except NodeMissing:
        raise NoContainer(_gone(source)) from None
    lines = raw.split("\n")
    if lines[-1] == "":
        lines.pop()  # the newline that ends the last line
    entries = [_entry(line) for line in lines]
    if after:
        entries = [(at, line) for at, line in entries if not at or at > after]
    cursor = next((at for at, _ in reversed(entries) if at), after)
    return LogLines(entries, cursor)


def running(source: LogSource) -> bool:
    """Whether the container runs (a stopped one has a log, but nothing more comes)."""
    try:
        return nodes.client(source.node).container_state(source.container) == "running"
    except NodeError:
        return False


def follow(
    source: LogSource,
    tail: int,
    seconds: float,
    *,
    after: str | None = None,
    timestamps: bool = False,
) -> AsyncIterator[str]:
    """The last `tail` lines (after the cursor `after`, if given), then each line as the
    container writes it, for at most `seconds` or until it stops, read on the event loop (the
    node layer's follow_logs_async). Whole lines only, each cut at LINE_MAX. Raises
    NoContainer at once (not part-way) when there is no container."""
    after = normal_cursor(after) if after else None
    client = nodes.client(source.node)
    if client.container_state(source.container) is None:
        raise NoContainer(_gone(source))
    stream = client.follow_logs_async(
        source.container,
        tail,
        seconds,
        since=_since(after) if after else None,
        timestamps=True,
    )
    return _alines(stream, after, timestamps)


async def _alines(
    stream: AsyncIterator[str], after: str | None, timestamps: bool, limit: int = LINE_MAX
) -> AsyncIterator[str]:
    splitter = LineSplitter(limit)
    try:
        async for text in stream:
            if chunk := _fresh(splitter.feed(text), after, timestamps):
                yield chunk
    except NodeMissing:
        return  # removed while followed: the log simply ends
    finally:
        if (aclose := getattr(stream, "aclose", None)) is not None:
            await aclose()  # the node's connection goes at once, not when collected
    if chunk := _fresh(splitter.flush(), after, timestamps):
        yield chunk


class LineSplitter:
    """Whole lines out of a stream of text chunks, in time linear in the text: an unfinished
    line is kept as a list of parts and joined once, when its newline comes (re-joining it on
    every chunk was quadratic). A line longer than `limit` characters is cut there and says
    so; the rest of it is dropped as it comes, so memory stays bounded too. `copied` counts
    the characters copied, for the test that the work is linear."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.copied = 0
        self._parts: list[str] = []
        self._held = 0  # characters in _parts
        self._cut = False  # the unfinished line passed the limit

    def feed(self, text: str) -> list[str]:
        """The lines this chunk completes, without their newlines."""
        lines = []
        start = 0
        while (end := text.find("\n", start)) >= 0:
            self._hold(text, start, end)
            lines.append(self._take())
            start = end + 1
        self._hold(text, start, len(text))
        return lines

    def flush(self) -> list[str]:
        """The unfinished last line, if any."""
        return [self._take()] if self._held or self._cut else []

    def _hold(self, text: str, start: int, end: int) -> None:
        room = self.limit - self._held
        if end - start > room:
            end, self._cut = start + max(room, 0), True
        if end > start:
            self._parts.append(text[start:end])
            self._held += end - start
            self.copied += end - start

    def _take(self) -> str:
        line = "".join(self._parts)
        self.copied += len(line)
        if self._cut:
            line += f" [line cut: longer than {self.limit} characters]"
        self._parts, self._held, self._cut = [], 0, False
        return line


def _fresh(complete: list[str], after: str | None, timestamps: bool) -> str:
    """The text of the complete lines written after the cursor (all of them without one)."""
    entries = [_entry(line) for line in complete]
    return LogLines([(at, x) for at, x in entries if not after or not at or at > after]).text(
        timestamps
    )
