"""Where a job runs (its cluster's first master) and what it left in its output path there."""

from dataclasses import dataclass
from urllib.parse import urlsplit

from django.conf import settings

from apps import nodes
from apps.clusters import container_specs as plans
from apps.clusters.models import Cluster, Instance
from apps.nodes import NodeClient, NodeMissing

from . import commands
from .models import Job
from .services import in_hdfs

HDFS_SECONDS = 60  # the hdfs client starts a JVM: a few seconds before it asks anything


class NoResult(Exception):
    """Nothing to list or read; the message says why."""


class ResultTooLarge(Exception):
    def __init__(self, name: str, size: int) -> None:
        cap = settings.JOB_RESULT_MAX_BYTES
        super().__init__(f"{name} is {size} bytes; downloads are capped at {cap} bytes")


@dataclass(frozen=True)
class OutputFile:
    name: str  # relative to the output path
    size: int


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


def read_output(job: Job, name: str) -> bytes:
    """One file of the output (NoResult, ResultTooLarge)."""
    parts = name.split("/")
    if not name or name.startswith("/") or ".." in parts:
        raise NoResult(f"{name!r} is not a file of the output")
    client, container = _where(job)
    if in_hdfs(job.output_path):
        return _read_hdfs(job, client, container, name)
    path = f"{commands.folder(job)}/{job.output_path}/{name}"
    try:
        size, data = client.get_file(container, path, settings.JOB_RESULT_MAX_BYTES)
    except NodeMissing:
        raise NoResult(f"the output has no file {name}") from None
    if data is None:
        raise ResultTooLarge(name, size)
    return data


def _read_hdfs(job: Job, client: NodeClient, container: str, name: str) -> bytes:
    """HDFS has no archive API: the file is sized first (refused above the cap without being
    copied), copied into the job's folder, read, and removed."""
    source = f"{job.output_path.rstrip('/')}/{name}"
    code, text = client.exec(container, ["hdfs", "dfs", "-stat", "%b", source], HDFS_SECONDS)
    size = text.strip().splitlines()[-1] if text.strip() else ""
    if code != 0 or not size.isdigit():
        raise NoResult(f"the output has no file {name}")
    if int(size) > settings.JOB_RESULT_MAX_BYTES:
        raise ResultTooLarge(name, int(size))
    copy = f"{commands.folder(job)}/.download"
    code, text = client.exec(container, ["hdfs", "dfs", "-get", "-f", source, copy], HDFS_SECONDS)
    if code != 0:
        raise NoResult(f"could not copy {name} out of HDFS: {_last_line(text)}")
    try:
        _size, data = client.get_file(container, copy, settings.JOB_RESULT_MAX_BYTES)
    finally:
        client.exec(container, ["rm", "-f", copy], settings.NODE_API_TIMEOUT)
    if data is None:  # grew between the two looks
        raise ResultTooLarge(name, _size)
    return data


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else "no answer"
