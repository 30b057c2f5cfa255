"""Keeping the database and the nodes in agreement (run by beat).

Per node: list the containers carrying this portal's site label and compare them with the
instances the database places there. An instance whose container died or vanished is marked
lost and its cluster degraded (failed when none of its instances runs); one whose container runs
again is marked running. A container a failure or a destroy could not remove (its node did not
answer) is removed as soon as its node answers, and only then are its address, disks and
segment released (apps.clusters.leftovers). Other containers no active instance owns are removed
once older than a grace period; a helper container (a wipe, a disk benchmark) only once the
operation that started it has ended (apps.nodes.helpers). A node that does not answer several
checks in a row is marked down; it comes back when it answers, unless an admin set its state.
"""

import logging
import time
from dataclasses import dataclass, field

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from apps import nodes
from apps.clusters import leftovers, notebook, states
from apps.clusters.container_specs import container_name
from apps.clusters.credentials import redact
from apps.clusters.models import Cluster, ClusterCredentials, ClusterEvent, Instance, Leftover
from apps.clusters.transitions import record_event, transition
from apps.inventory.models import Node
from apps.inventory.services import record_health_check
from apps.nodes import NodeError, helpers, parallel
from apps.products.registry import plugin_for

from . import operations, perimeter

log = logging.getLogger(__name__)
S = Cluster.State
WATCHED = states.WATCHED  # other states have a task at work on them, or no containers to run


@dataclass
class Report:
    checked: list[str] = field(default_factory=list)
    unreachable: list[str] = field(default_factory=list)
    marked_down: list[str] = field(default_factory=list)
    back_up: list[str] = field(default_factory=list)
    lost: list[str] = field(default_factory=list)
    recovered: list[str] = field(default_factory=list)
    restarted: list[str] = field(default_factory=list)
    given_up: dict[int, str] = field(default_factory=dict)  # cluster id: why it fails
    orphans_removed: list[str] = field(default_factory=list)
    leftovers_released: list[str] = field(default_factory=list)
    perimeter: list[str] = field(default_factory=list)  # nodes whose rules were loaded


def reconcile(grace_seconds: int | None = None) -> dict:
    grace = settings.ORPHAN_GRACE_SECONDS if grace_seconds is None else grace_seconds
    report = Report()
    touched: set[int] = set()
    nodes = list(Node.objects.exclude(state=Node.State.MAINTENANCE))
    # Ask every node at once: one that does not answer costs its timeout, not everyone's.
    listings = parallel(_survey, nodes)
    # The perimeter's rules before any container is started again below: a node that came
    # back without them (or whose rules changed) gets them first.
    answering = [
        n for n, found in zip(nodes, listings, strict=True) if not isinstance(found, Exception)
    ]
    report.perimeter = perimeter.refresh(answering)
    for node, found in zip(nodes, listings, strict=True):
        if isinstance(found, Exception):
            error = found if isinstance(found, NodeError) else NodeError(node.name, str(found))
            report.unreachable.append(node.name)
            touched |= _node_failed(node, error, report)
            continue
        report.checked.append(node.name)
        found, images = found
        _node_answered(node, images, report)
        touched |= _compare(node, found, report)
        removed = _release_leftovers(node, found, report)
        _remove_orphans(node, [c for c in found if c["Id"] not in removed], grace, report)
    for cluster_id, why in report.given_up.items():
        operations.fail(cluster_id, WATCHED, why)
    for cluster_id in touched - set(report.given_up):
        _settle(cluster_id)
    probe_notebooks()
    return report.__dict__


def probe_notebooks() -> list[str]:
    """Record on each running notebook not known to answer yet whether JupyterLab does now
    (the cluster page's "ready"); one that stopped or was lost forgets it. How to ask is the
    version's plugin's (Spark's: JupyterLab's /api/status); a version whose plugin has no
    notebook probe is not asked. Returns the hostnames found ready."""
    notebooks = Instance.objects.filter(role=notebook.ROLE, active=True)
    notebooks.exclude(state=Instance.State.RUNNING).exclude(answered_at=None).update(
        answered_at=None
    )
    waiting = list(
        notebooks.filter(
            state=Instance.State.RUNNING,
            answered_at=None,
            cluster__state__in=(S.RUNNING, S.DEGRADED),
        )
        .exclude(node=None)
        .select_related("node", "cluster__version", "cluster__revision")
    )
    probes = {i.id: plugin_for(i.cluster.definition).notebook_probe for i in waiting}
    asked = [(i, probe) for i in waiting if (probe := probes[i.id]) is not None]
    results = parallel(
        lambda pair: nodes.client(pair[0].node).exec(
            container_name(pair[0].cluster_id, pair[0].role, pair[0].index),
            pair[1].argv,
            pair[1].timeout,
        ),
        asked,
    )
    ready = []
    for (instance, probe), outcome in zip(asked, results, strict=True):
        if isinstance(outcome, Exception) or outcome[0] != 0:
            continue  # not yet (or its node did not answer): asked again next time
        if probe.marker in outcome[1]:
            Instance.objects.filter(id=instance.id, answered_at=None).update(
                answered_at=timezone.now()
            )
            ready.append(instance.hostname)
    return ready


def _survey(node: Node) -> tuple[list[dict], list[str]]:
    """Our containers on the node, and the image references it holds (for the catalog)."""
    client = nodes.client(node)
    return client.containers({"platter.site": settings.PLATTER_SITE}), client.images()


def _node_failed(node: Node, error: NodeError, report: Report) -> set[int]:
    """Count a failed check; past the limit, mark the node down and its instances lost."""
    if record_health_check(node.id, error=error.message) == "down":
        report.marked_down.append(node.name)
        log.warning("node %s marked down: %s", node.name, error)
    if Node.objects.get(id=node.id).failed_checks < settings.NODE_DOWN_AFTER_FAILED_CHECKS:
        return set()
    touched = set()
    for instance in _watched_instances(node).filter(state=Instance.State.RUNNING):
        why = f"lost: node {node.name} does not answer ({error.message})"
        touched.add(_mark_lost(instance, f"{instance.hostname} {why}", report))
    return touched


def _mark_lost(instance: Instance, message: str, report: Report) -> int:
    """Record an instance as lost, with the event saying why; returns its cluster id."""
    Instance.objects.filter(id=instance.id).update(state=Instance.State.LOST)
    record_event(instance.cluster_id, message, ClusterEvent.Level.ERROR)
    report.lost.append(f"{instance.cluster_id}/{instance.hostname}")
    return instance.cluster_id


def _node_answered(node: Node, images: list[str], report: Report) -> None:
    if record_health_check(node.id, images=images) == "up":
        report.back_up.append(node.name)


def _watched_instances(node: Node):
    return Instance.objects.filter(node=node, active=True, cluster__state__in=WATCHED)


def _compare(node: Node, found: list[dict], report: Report) -> set[int]:
    """Mark instances lost or running again as their containers say. A container that
    stopped on its own is started again, as a supervisor would, up to CONTAINER_RESTARTS
    times; past that its cluster fails, naming the instance and its last log lines."""
    by_instance = {c["Labels"].get("platter.instance"): c for c in found}
    touched = set()
    for instance in _watched_instances(node):
        container = by_instance.get(str(instance.id))
        running = container is not None and container["State"] == "running"
        if container is not None and container["State"] == "restarting":
            continue  # its node's Docker is restarting it after a crash
        if not running and instance.state != Instance.State.LOST:
            why = f"exited ({container['Status']})" if container else "vanished"
            message = f"{instance.hostname}'s container on {node.name} {why}"
            if container is not None:
                message += _last_lines(node, container["Id"], instance.cluster_id)
                if _start_again(node, instance, container["Id"], message, report):
                    continue
                if instance.restarts >= settings.CONTAINER_RESTARTS:
                    report.given_up[instance.cluster_id] = (
                        f"{message.replace(' exited', ' stopped', 1)}\n"
                        f"(started again {instance.restarts} times; it keeps stopping)"
                    )
            touched.add(_mark_lost(instance, message, report))
        elif running and instance.state == Instance.State.LOST:
            Instance.objects.filter(id=instance.id).update(state=Instance.State.RUNNING)
            record_event(instance.cluster_id, f"{instance.hostname} runs again on {node.name}")
            report.recovered.append(f"{instance.cluster_id}/{instance.hostname}")
            touched.add(instance.cluster_id)
    return touched


def _start_again(
    node: Node, instance: Instance, container_id: str, message: str, report: Report
) -> bool:
    """Start a stopped container again while its restarts last; whether it was."""
    if instance.restarts >= settings.CONTAINER_RESTARTS:
        return False
    try:
        nodes.client(node).start(container_id)
    except NodeError as error:
        log.warning("node %s: could not start %s again: %s", node.name, instance, error)
        return False
    done = instance.restarts + 1
    Instance.objects.filter(id=instance.id).update(restarts=done)
    record_event(
        instance.cluster_id,
        f"{message}\nstarted it again ({done} of {settings.CONTAINER_RESTARTS})",
        ClusterEvent.Level.WARNING,
    )
    report.restarted.append(f"{instance.cluster_id}/{instance.hostname}")
    return True


def _last_lines(node: Node, container_id: str, cluster_id: int, lines: int = 5) -> str:
    """The end of a container's log, for the event that says it stopped (the cluster's
    credentials masked, in case a product logs them)."""
    try:
        raw = nodes.client(node).logs(container_id, tail=lines)
    except NodeError:
        return ""
    found = ClusterCredentials.objects.filter(cluster_id=cluster_id).first()
    text = redact(raw, found).strip()[-600:]
    return f"; last log lines:\n{text}" if text else ""


def _settle(cluster_id: int) -> None:
    """degraded while some instance is lost, running when all run again, and failed (with
    everything it held given back, its data kept) when none runs: each instance's node
    already restarted it as often as CONTAINER_RESTARTS allows, and the events name the
    instances and their last log lines."""
    with transaction.atomic():
        cluster = Cluster.objects.select_for_update().filter(id=cluster_id).first()
        if cluster is None or cluster.state not in WATCHED:
            return
        states = list(cluster.instances.filter(active=True).values_list("state", flat=True))
        lost = states.count(Instance.State.LOST)
        if lost == 0:
            transition(cluster_id, S.DEGRADED, S.RUNNING, "every instance runs again")
        elif lost < len(states) and cluster.state == S.RUNNING:
            transition(cluster_id, S.RUNNING, S.DEGRADED, f"{lost} of {len(states)} lost")
    if states and lost == len(states):
        operations.fail(cluster_id, WATCHED, "no instance of the cluster runs")


def _release_leftovers(node: Node, found: list[dict], report: Report) -> set[str]:
    """Containers a failure or a destroy could not remove from this node (it did not answer)
    hold their addresses, disks and segment until seen gone: remove each one still here
    (no grace: it is known to be ours and unwanted), then release what it held, exactly once
    (apps.clusters.leftovers). Returns the ids of the containers removed."""
    by_name = {c["Names"][0].lstrip("/"): c for c in found if c.get("Names")}
    current = dict(
        Instance.objects.filter(node=node, active=True).values_list("id", "container_id")
    )
    removed: set[str] = set()
    for leftover in Leftover.objects.filter(node=node, released=None).order_by("id"):
        container = by_name.get(leftover.container)
        if container is not None:
            owner = container["Labels"].get("platter.instance", "")
            if owner.isdigit() and int(owner) in current:
                if current[int(owner)] != container["Id"]:
                    continue  # a placement in flight on this node replaces it: next pass
                container = None  # that placement already replaced it: the leftover is gone
        if container is not None:
            try:
                nodes.client(node).remove(container["Id"])
            except NodeError as error:
                log.warning("node %s: could not remove %s: %s", node.name, leftover, error)
                continue
            removed.add(container["Id"])
        if leftovers.release(leftover, f"is gone from {node.name}"):
            report.leftovers_released.append(f"{node.name}/{leftover.container}")
    return removed


def _remove_orphans(node: Node, found: list[dict], grace: int, report: Report) -> None:
    """Remove our containers that no active instance on this node owns, once old enough
    (a launch in flight creates its containers right after it reserved). A helper container
    (a wipe, a disk benchmark) is left alone while the operation that started it runs: a
    wipe of many disks may take longer than any grace period (apps.nodes.helpers)."""
    owners = {
        str(i) for i in Instance.objects.filter(node=node, active=True).values_list("id", flat=True)
    }
    client = nodes.client(node)
    now = time.time()
    for container in found:
        if container["Labels"].get("platter.instance") in owners:
            continue
        age = now - container["Created"]
        if age < grace:
            continue
        if helpers.HELPER in container["Labels"] and helpers.in_use(container["Labels"], age):
            continue
        name = container["Names"][0].lstrip("/") if container.get("Names") else container["Id"]
        try:
            client.remove(container["Id"])
        except Exception as error:  # noqa: BLE001 (next pass tries again)
            log.warning("node %s: could not remove orphan %s: %s", node.name, name, error)
            continue
        report.orphans_removed.append(f"{node.name}/{name}")
        cluster_id = container["Labels"].get("platter.cluster", "")
        if cluster_id.isdigit() and Cluster.objects.filter(id=int(cluster_id)).exists():
            record_event(int(cluster_id), f"removed leftover container {name} on {node.name}")
