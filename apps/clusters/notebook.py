"""A cluster's notebook (Spark's launch option ``notebook``: one more instance, notebook-0,
running JupyterLab on 8888): the rules of adding one to a running cluster, and its state in
words. Plain functions over the records (no node calls): adding is a grow of the notebook role
from 0 to 1 by the resize operation (services.request_notebook, workers/resize.py); whether
JupyterLab answers is recorded on the instance by the reconciler (workers/reconciler.py,
Instance.answered_at)."""

from dataclasses import dataclass, replace

from apps.catalog.options import resolve
from apps.catalog.spec import definition_of

from .models import Cluster, ClusterEvent, Instance
from .resize import ResizePlan, refusal
from .transitions import TransitionError

ROLE = "notebook"
OPTION = "notebook"  # the bool launch option that sets the role's count
PORT = 8888
S = Cluster.State
I = Instance.State  # noqa: E741


class NotebookRefused(TransitionError):
    """A notebook that cannot be added now; the message says why (HTTP 409)."""


def offers_notebook(cluster: Cluster) -> bool:
    """The cluster's version has the notebook option (Spark's)."""
    return has_notebook_option(cluster.definition)


def has_notebook_option(version: object) -> bool:
    """A version (a ProductVersion, or a cluster's frozen definition) has the notebook option:
    a bool launch option that sets the notebook role's count."""
    option = definition_of(version).options.get(OPTION)
    return option is not None and option.sets == "count"


def plan(cluster: Cluster) -> ResizePlan:
    """The grow of the notebook role from 0 to 1, with the instance as a launch with the
    option would make it; NotebookRefused naming why it cannot be added."""
    if not offers_notebook(cluster):
        product = cluster.version.product.title or cluster.version.product.name
        raise NotebookRefused(f"{product} clusters have no notebook: only Spark clusters do")
    if words := refusal(cluster, ROLE, 0, 1):  # the version's plugin's word on its role
        raise NotebookRefused(words)
    if cluster.state != S.RUNNING:
        raise NotebookRefused(
            f"cluster {cluster.name} is {cluster.state}; a notebook is added to a running "
            "cluster only"
        )
    if Instance.objects.filter(cluster=cluster, role=ROLE).exclude(state=I.RELEASED).exists():
        raise NotebookRefused(f"cluster {cluster.name} has a notebook already")
    wanted = resolve(cluster.definition, {**cluster.options, OPTION: True}).instances
    # A notebook whose add failed keeps its row (released): the next one takes the next index.
    taken = Instance.objects.filter(cluster=cluster, role=ROLE).values_list("index", flat=True)
    first = 1 + max(taken, default=-1)
    added = [replace(i, index=first + n) for n, i in enumerate(w for w in wanted if w.role == ROLE)]
    return ResizePlan(cluster.id, ROLE, 0, len(added), added)


@dataclass(frozen=True)
class NotebookState:
    state: str  # adding, starting, ready, stopped, failed
    words: str  # for people
    hostname: str = ""


def state_of(cluster: Cluster) -> NotebookState | None:
    """The notebook's state in words, or None when the cluster has none. Reads the cluster's
    instances and events as loaded (the API's detail query prefetches them)."""
    mine = sorted((i for i in cluster.instances.all() if i.role == ROLE), key=lambda i: i.index)
    active = [i for i in mine if i.active or i.state in (I.PENDING, I.RESERVED)]
    if not active:
        if mine and cluster.state in (S.RUNNING, S.DEGRADED):
            return NotebookState("failed", f"failed: {_last_error(cluster)}", mine[-1].hostname)
        return None
    notebook = active[-1]
    host = notebook.hostname
    if notebook.state in (I.PENDING, I.RESERVED) or cluster.state == S.RESIZING:
        return NotebookState("adding", "being added: reserving and starting its instance", host)
    if cluster.state == S.FAILED:
        return NotebookState("failed", f"failed with the cluster: {_last_error(cluster)}", host)
    if cluster.state in (S.STOPPING, S.STOPPED):
        return NotebookState("stopped", "stopped with the cluster; it starts with it", host)
    if cluster.state in (S.DESTROYING, S.DESTROYED):
        return None
    if notebook.state == I.LOST:
        return NotebookState("failed", "failed: its container stopped (being restarted)", host)
    if notebook.state == I.RUNNING and cluster.state in (S.RUNNING, S.DEGRADED):
        since = cluster.configuring_at  # its container started again with the cluster
        if notebook.answered_at is not None and (since is None or notebook.answered_at > since):
            return NotebookState("ready", "ready: JupyterLab answers", host)
        return NotebookState("starting", "starting: JupyterLab does not answer yet", host)
    return NotebookState("starting", "starting with the cluster", host)


def _last_error(cluster: Cluster) -> str:
    errors = [e for e in cluster.events.all() if e.level == ClusterEvent.Level.ERROR]
    latest = max(errors, key=lambda e: e.id, default=None)
    return latest.message if latest is not None else "see the cluster's events"
