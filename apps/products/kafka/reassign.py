"""Kafka's side of a shrink: every partition replica on the leaving brokers moves to the
brokers that stay before they stop, by the image's own admin command (kafka-admin
reassign-off, which runs Kafka's ReassignPartitionsCommand and waits until it is done). Node
work goes through the resize's Operator (apps/products/base.py); the commands run on the
first controller, which a resize never removes."""

from django.conf import settings

from .. import base
from ..base import Member, Operator, ResizeFailed
from . import rules

ADMIN = "kafka-admin"  # deploy/images/kafka/rootfs/opt/platter/bin/kafka-admin
ADMIN_SECONDS = 120


def admin(op: Operator, on: Member, argv: list[str], timeout: int = ADMIN_SECONDS) -> dict:
    """kafka-admin's answer; ResizeFailed with its own words when it refuses or fails."""
    return base.admin(op, on, [ADMIN, *argv], timeout)


def observer_of(members: list[Member]) -> Member:
    controllers = sorted((m for m in members if m.role == rules.CONTROLLER), key=lambda m: m.index)
    if not controllers:
        raise ResizeFailed("the cluster has no controller to run kafka-admin on")
    return controllers[0]


def drain(op: Operator, leaving: list[Member]) -> None:
    """Refused before anything moves when a topic keeps more replicas than brokers would stay
    (rules.shrink_refusal). Then kafka-admin moves every replica of the leaving brokers to
    the ones that stay and waits until the controller lists none on them; they stop, their
    registrations are removed, and the worker releases them after."""
    ids = {m.id for m in leaving}
    members = [m for m in op.members() if m.role in (rules.CONTROLLER, rules.BROKER)]
    leaving = sorted((m for m in members if m.id in ids), key=lambda m: -m.index)
    staying = [m for m in members if m.id not in ids]
    observer = observer_of(staying)
    topics = admin(op, observer, ["topics"])["topics"]
    refusal = rules.shrink_refusal(topics, len(staying))
    if refusal:
        raise ResizeFailed(refusal)
    brokers = [str(rules.broker_id(m)) for m in leaving]
    names = ", ".join(f"{m.hostname} (broker {rules.broker_id(m)})" for m in leaving)
    held = sum(int(t["replicas_on"].get(b, 0)) for t in topics for b in brokers)
    op.event(f"moving {held} partition replicas off {names} to the {len(staying)} that stay")
    seconds = settings.RESIZE_DRAIN_SECONDS
    done = admin(op, observer, ["reassign-off", *brokers, "--timeout", str(seconds)], seconds + 60)
    status = admin(op, observer, ["drain-status", *brokers])
    if not status.get("done"):
        raise ResizeFailed(f"replicas still on the leaving brokers: {status['replicas_left']}")
    op.event(
        f"{done['moved']} partitions moved off {names} in {done['seconds']} s "
        f"({', '.join(done['topics']) or 'none held'}); no replica left on them"
    )
    # A KRaft cluster keeps a broker registered until told: stopped first (a running one
    # registers again), then forgotten. One still listed holds nothing and is fenced within
    # seconds, so that is a warning, not a failed resize.
    op.stop(leaving)
    try:
        admin(op, observer, ["unregister", *brokers])
    except ResizeFailed as error:
        op.event(f"{names} stopped but still registered: {error}", "warning")
    else:
        op.event(f"{names} stopped and unregistered from the cluster")
