"""Keeping the database and the nodes in agreement (run by beat).

Per node: list the containers carrying this portal's site label and compare them with the
instances the database places there. An instance whose container died or vanished is marked
lost and its cluster degraded (failed when none of its instances runs); one whose container runs
again is marked running. Containers no active instance owns (left by a node that did not answer
during a destroy or a failed launch) are removed once older than a grace period. A node that
does not answer several checks in a row is marked down; it comes back when it answers, unless
an admin set its state.
"""

import logging
import time
from dataclasses import dataclass, field

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from apps.audit.services import Action, record
from apps.clusters.credentials import redact
from apps.clusters.models import Cluster, ClusterCredentials, ClusterEvent, Instance
from apps.clusters.transitions import record_event, transition
from apps.inventory.models import Node

from . import drivers
from .drivers import NodeError
from .lifecycle import parallel

log = logging.getLogger(__name__)
S = Cluster.State
WATCHED = (S.RUNNING, S.DEGRADED)  # other states have a task at work on them


@dataclass
class Report:
    checked: list[str] = field(default_factory=list)
    unreachable: list[str] = field(default_factory=list)
    marked_down: list[str] = field(default_factory=list)
    back_up: list[str] = field(default_factory=list)
    lost: list[str] = field(default_factory=list)
    recovered: list[str] = field(default_factory=list)
    orphans_removed: list[str] = field(default_factory=list)


def reconcile(grace_seconds: int | None = None) -> dict:
    grace = settings.ORPHAN_GRACE_SECONDS if grace_seconds is None else grace_seconds
    report = Report()
    touched: set[int] = set()
    nodes = list(Node.objects.exclude(state=Node.State.MAINTENANCE))
    # Ask every node at once: one that does not answer costs its timeout, not everyone's.
    listings = parallel(_survey, nodes)
    for node, found in zip(nodes, listings, strict=True):
        if isinstance(found, Exception):
            error = drivers.classify(node.name, found)
            report.unreachable.append(node.name)
            touched |= _node_failed(node, error, report)
            continue
        report.checked.append(node.name)
        found, images = found
        _node_answered(node, images, report)
        touched |= _compare(node, found, report)
        _remove_orphans(node, found, grace, report)
    for cluster_id in touched:
        _settle(cluster_id)
    return report.__dict__


def _survey(node: Node) -> tuple[list[dict], list[str]]:
    """Our containers on the node, and the image references it holds (for the catalog)."""
    api = drivers.client_for(node).api
    site = f"platter.site={settings.PLATTER_SITE}"
    found = drivers.call(
        node, lambda: api.containers(all=True, filters={"label": site}), "list containers"
    )
    return found, drivers.image_references(node)


def _node_failed(node: Node, error: NodeError, report: Report) -> set[int]:
    """Count a failed check; past the limit, mark the node down and its instances lost."""
    Node.objects.filter(id=node.id).update(failed_checks=node.failed_checks + 1)
    if node.failed_checks + 1 < settings.NODE_DOWN_AFTER_FAILED_CHECKS:
        return set()
    touched = set()
    if node.state == Node.State.ACTIVE or node.state == Node.State.DRAINING:
        with transaction.atomic():  # the system's own state change, audited with no actor
            Node.objects.filter(id=node.id).update(state=Node.State.DOWN, down_by_health_check=True)
            record(Action.NODE_DOWN, None, node, previous=node.state,
                   reason=f"does not answer health checks: {error.message}")  # fmt: skip
        report.marked_down.append(node.name)
        log.warning("node %s marked down: %s", node.name, error)
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
    changes: dict = {"failed_checks": 0, "last_seen": timezone.now(), "images": images}
    back_up = node.state == Node.State.DOWN and node.down_by_health_check
    if back_up:
        changes |= {"state": Node.State.ACTIVE, "down_by_health_check": False}
        report.back_up.append(node.name)
    with transaction.atomic():
        Node.objects.filter(id=node.id).update(**changes)
        if back_up:
            record(Action.NODE_ACTIVATE, None, node, previous=node.state,
                   reason="answers health checks again")  # fmt: skip


def _watched_instances(node: Node):
    return Instance.objects.filter(node=node, active=True, cluster__state__in=WATCHED)


def _compare(node: Node, found: list[dict], report: Report) -> set[int]:
    """Mark instances lost or running again as their containers say."""
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
            touched.add(_mark_lost(instance, message, report))
        elif running and instance.state == Instance.State.LOST:
            Instance.objects.filter(id=instance.id).update(state=Instance.State.RUNNING)
            record_event(instance.cluster_id, f"{instance.hostname} runs again on {node.name}")
            report.recovered.append(f"{instance.cluster_id}/{instance.hostname}")
            touched.add(instance.cluster_id)
    return touched


def _last_lines(node: Node, container_id: str, cluster_id: int, lines: int = 5) -> str:
    """The end of a container's log, for the event that says it stopped (the cluster's
    credentials masked, in case a product logs them)."""
    api = drivers.client_for(node).api
    try:
        raw = drivers.call(node, lambda: api.logs(container_id, tail=lines), "read the log")
    except NodeError:
        return ""
    found = ClusterCredentials.objects.filter(cluster_id=cluster_id).first()
    text = redact(raw.decode(errors="replace"), found).strip()[-600:]
    return f"; last log lines:\n{text}" if text else ""


def _settle(cluster_id: int) -> None:
    """degraded while some instance is lost, failed when none runs, running when all do."""
    with transaction.atomic():
        cluster = Cluster.objects.select_for_update().filter(id=cluster_id).first()
        if cluster is None or cluster.state not in WATCHED:
            return
        states = list(cluster.instances.filter(active=True).values_list("state", flat=True))
        lost = states.count(Instance.State.LOST)
        if lost == 0:
            transition(cluster_id, S.DEGRADED, S.RUNNING, "every instance runs again")
        elif lost == len(states):
            transition(cluster_id, WATCHED, S.FAILED, "no instance of the cluster runs")
        elif cluster.state == S.RUNNING:
            transition(cluster_id, S.RUNNING, S.DEGRADED, f"{lost} of {len(states)} lost")


def _remove_orphans(node: Node, found: list[dict], grace: int, report: Report) -> None:
    """Remove our containers that no active instance on this node owns, once old enough
    (a launch in flight creates its containers right after it reserved)."""
    owners = {
        str(i) for i in Instance.objects.filter(node=node, active=True).values_list("id", flat=True)
    }
    api = drivers.client_for(node).api
    now = time.time()
    for container in found:
        if container["Labels"].get("platter.instance") in owners:
            continue
        if now - container["Created"] < grace:
            continue
        name = container["Names"][0].lstrip("/") if container.get("Names") else container["Id"]
        try:
            drivers.call(node, lambda c=container: api.remove_container(c["Id"], force=True), "rm")
        except Exception as error:  # noqa: BLE001 (next pass tries again)
            log.warning("node %s: could not remove orphan %s: %s", node.name, name, error)
            continue
        report.orphans_removed.append(f"{node.name}/{name}")
        cluster_id = container["Labels"].get("platter.cluster", "")
        if cluster_id.isdigit() and Cluster.objects.filter(id=int(cluster_id)).exists():
            record_event(int(cluster_id), f"removed leftover container {name} on {node.name}")
