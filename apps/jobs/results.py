"""Where a job runs (its cluster's first master) and what it left in its output path there."""

from dataclasses import dataclass

from django.conf import settings

from apps import nodes
from apps.clusters import plans
from apps.clusters.models import Cluster, Instance
from apps.nodes import NodeClient, NodeMissing

from . import commands
from .models import Job


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
    """The files under the job's output path (at most 1000, four folders deep)."""
    client, container = _where(job)
    _code, text = client.exec(container, commands.outputs(job), settings.NODE_API_TIMEOUT)
    found = []
    for line in text.splitlines():
        size, _, name = line.partition("\t")
        if size.isdigit() and name:
            found.append(OutputFile(name, int(size)))
    return sorted(found, key=lambda f: f.name)


def read_output(job: Job, name: str) -> bytes:
    """One file of the output (NoResult, ResultTooLarge)."""
    parts = name.split("/")
    if not name or name.startswith("/") or ".." in parts:
        raise NoResult(f"{name!r} is not a file of the output")
    client, container = _where(job)
    path = f"{commands.folder(job)}/{job.output_path}/{name}"
    try:
        size, data = client.get_file(container, path, settings.JOB_RESULT_MAX_BYTES)
    except NodeMissing:
        raise NoResult(f"the output has no file {name}") from None
    if data is None:
        raise ResultTooLarge(name, size)
    return data
