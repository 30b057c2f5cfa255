"""Where a job runs (its cluster's first master) and what it left in its output path there."""

import uuid
from collections.abc import Iterator
from contextlib import suppress
from dataclasses import dataclass
from urllib.parse import urlsplit

from django.conf import settings

from apps import nodes
from apps.clusters import container_specs as plans
from apps.clusters.models import Cluster, Instance
from apps.nodes import NodeClient, NodeError, NodeMissing
from apps.nodes.errors import NotAFile

from . import commands
from .models import Job
from .services import in_hdfs

HDFS_SECONDS = 60  # the hdfs client starts a JVM: a few seconds before it asks anything


class NoResult(Exception):
    """Nothing to list or read; the message says why."""


class NotDownloadable(Exception):
    """The name is there but is not one regular file; the message says what it is."""


@dataclass(frozen=True)
class OutputFile:
    name: str  # relative to the output path
    size: int


@dataclass(frozen=True)
class Download:
    """One file of the output on its way: `length` bytes of its `size` come as `chunks`
    (its first JOB_RESULT_MAX_BYTES at most), never held whole."""

    name: str  # the file's own name, without the folders above it
    size: int
    length: int
    chunks: Iterator[bytes]

    @property
    def cut(self) -> bool:
        return self.length < self.size


def master_of(cluster: Cluster) -> tuple[NodeClient, str]:
    """The client of the node holding the cluster's first master, and its container; NoResult
    when it has none running."""
    master = (
        Instance.objects.filter(cluster=cluster, role="master", active=True)
        .select_related("node")
        .order_by("index")
        .first()
    )
    if master is None or master.node is None:
        raise NoResult(f"cluster {cluster.name} has no running master")
    name = master.container_id or plans.container_name(cluster.id, master.role, master.index)
    return nodes.client(master.node), name


def _where(job: Job) -> tuple[NodeClient, str]:
    if not job.output_path:
        raise NoResult(f"job {job.id} named no output path")
    if job.cluster.state != Cluster.State.RUNNING:
        raise NoResult(f"the output is in the cluster, which is {job.cluster.state}")
    return master_of(job.cluster)


def list_outputs(job: Job) -> list[OutputFile]:
    """The files under the job's output path (at most 1000, four folders deep; in HDFS, every
    file under it)."""
    client, container = _where(job)
    if in_hdfs(job.output_path):
        code, text = client.exec(container, commands.hdfs_outputs(job), HDFS_SECONDS)
        if code != 0:
            raise NoResult(f"HDFS has no {job.output_path} (yet): {_last_line(text)}")
        return sorted(hdfs_files(job.output_path, text), key=lambda f: f.name)
    _code, text = client.exec(container, commands.outputs(job), settings.NODE_API_TIMEOUT)
    found = []
    for line in text.splitlines():
        size, _, name = line.partition("\t")
        if size.isdigit() and name:
            found.append(OutputFile(name, int(size)))
    return sorted(found, key=lambda f: f.name)


def hdfs_files(output_path: str, listing: str) -> list[OutputFile]:
    """The files of an `hdfs dfs -ls -R` listing, named relative to the output path (the
    listing may print the paths with the NameNode's address in them)."""
    base = urlsplit(output_path).path.rstrip("/") + "/"
    found = []
    for line in listing.splitlines():
        fields = line.split(None, 7)
        if len(fields) < 8 or not fields[0].startswith("-") or not fields[4].isdigit():
            continue  # a folder, or a warning of the client's
        path = urlsplit(fields[7]).path
        if path.startswith(base):
            found.append(OutputFile(path.removeprefix(base), int(fields[4])))
    return found


def read_output(job: Job, name: str) -> Download:
    """One file of the output, to stream: its first JOB_RESULT_MAX_BYTES bytes at most.
    NoResult when there is no such file; NotDownloadable when the name is a folder, a
    symbolic link (or has one on its way), anything but a regular file, or an HDFS pattern."""
    if not name or name.startswith("/") or any(p in ("", ".", "..") for p in name.split("/")):
        raise NoResult(f"{name!r} is not a file of the output")
    client, container = _where(job)
    if in_hdfs(job.output_path):
        return _read_hdfs(job, client, container, name)
    root = f"{commands.folder(job)}/{job.output_path}"
    try:
        found = client.open_file(container, f"{root}/{name}", settings.JOB_RESULT_MAX_BYTES)
    except NodeMissing:
        raise NoResult(f"the output has no file {name}") from None
    except NotAFile as error:
        raise _not_a_file(error.path, error.kind, root, name) from None
    return _download(name, found.size, found.chunks)


def _download(name: str, size: int, chunks: Iterator[bytes]) -> Download:
    length = min(size, settings.JOB_RESULT_MAX_BYTES)
    return Download(name.rsplit("/", 1)[-1], size, length, chunks)


def _not_a_file(path: str, kind: str, root: str, name: str) -> "NotDownloadable":
    """The refusal in the output's own words: which part of the name is what."""
    shown = "the output folder" if path == root else path.removeprefix(f"{root}/")
    where = "" if shown == name else f" (on the way to {name})"
    hint = ": download the files in it one by one" if shown == name and kind == "a folder" else ""
    return NotDownloadable(f"{shown}{where} is {kind}; only regular files download{hint}")


# What HDFS's shell expands in a path (globs and their escape): a name holding one could
# stand for many files, or a folder.
HDFS_PATTERN = frozenset("*?[]{}\\")
# The file's first bytes copied into the job's folder ("$1" the file, "$2" the cap, "$3" the
# copy), by the container's own hdfs client: the copy is then read as any local output is.
HDFS_COPY = 'hdfs dfs -cat "$1" | head -c "$2" >"$3"'


def _read_hdfs(job: Job, client: NodeClient, container: str, name: str) -> Download:
    """HDFS has no archive API: the file is looked at first (a folder is refused without a
    copy), its first JOB_RESULT_MAX_BYTES bytes are copied into the job's folder, streamed
    from there, and the copy removed once the stream ends."""
    if pattern := sorted(HDFS_PATTERN.intersection(name)):
        raise NotDownloadable(
            f"{name!r} has {' '.join(pattern)}, which HDFS reads as a pattern; name one file"
        )
    source = f"{job.output_path.rstrip('/')}/{name}"
    code, text = client.exec(container, ["hdfs", "dfs", "-stat", "%b %F", source], HDFS_SECONDS)
    size, _, kind = _last_line(text).partition(" ")
    if code != 0 or not size.isdigit():
        raise NoResult(f"the output has no file {name}")
    if kind != "regular file":
        kind = {"directory": "a folder", "symlink": "a symbolic link"}.get(kind, f"a {kind}")
        raise _not_a_file(source, kind, job.output_path.rstrip("/"), name)
    cap = settings.JOB_RESULT_MAX_BYTES
    copy = f"{commands.folder(job)}/.download-{uuid.uuid4().hex[:12]}"
    argv = ["sh", "-c", HDFS_COPY, "platter-hdfs-copy", source, str(cap), copy]
    code, text = client.exec(container, argv, HDFS_SECONDS)
    try:
        found = client.open_file(container, copy, cap)
    except (NodeMissing, NotAFile):
        found = None  # the container's hdfs left no plain file there
    except NodeError:
        _remove(client, container, copy)
        raise
    if found is None or code != 0 or found.size < min(int(size), cap):
        getattr(found and found.chunks, "close", lambda: None)()
        _remove(client, container, copy)
        raise NoResult(f"could not copy {name} out of HDFS: {_last_line(text)}")
    # What is sent is the copy (cut at the cap): the file may have grown since its look.
    chunks = _removed_after(found.chunks, client, container, copy)
    length = min(found.size, cap)
    return Download(name.rsplit("/", 1)[-1], max(int(size), found.size), length, chunks)


def _removed_after(
    chunks: Iterator[bytes], client: NodeClient, container: str, copy: str
) -> Iterator[bytes]:
    try:
        yield from chunks
    finally:  # also when the reader left early
        _remove(client, container, copy)


def _remove(client: NodeClient, container: str, copy: str) -> None:
    with suppress(NodeError, TimeoutError):
        client.exec(container, ["rm", "-f", copy], settings.NODE_API_TIMEOUT)


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else "no answer"
