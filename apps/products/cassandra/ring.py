"""Cassandra's side of a resize: nodes join the ring one at a time and leave it by nodetool
decommission, one at a time. Node work goes through the resize's Operator (apps/products/
base.py).

Every change goes through a seed's view of the ring (`nodetool status`; seeds never leave)
and through cqlsh on that seed, logged in as the owner by root's ~/.cassandra/credentials
(cassandra-start writes it)."""

import json
import re
import time
from dataclasses import dataclass

from django.conf import settings

from ..base import Member, Operator, ResizeFailed, StepFailed, admin
from . import rules

NODETOOL_SECONDS = 120
CQLSH_SECONDS = 90
# How long a node that did not join may stay listed (gossip forgets a dead joining node after
# its ring delay; one that became a member is removed with nodetool removenode).
FORGET_SECONDS = 120
RESTART_SECONDS = 300  # a restarted node back to UN (JVM start, commit log replay, gossip)
ADMIN = "cassandra-admin"  # deploy/images/cassandra/rootfs/opt/platter/bin/cassandra-admin
# The start script's switch: a node added to a running ring streams its ranges before it
# serves them (a launch's nodes start at once as a brand-new ring, without).
BOOTSTRAP = {"CASSANDRA_AUTO_BOOTSTRAP": "true"}
STATUS_LINE = re.compile(r"^([UD][NLJM])\s+(\S+)\s")
HOST_ID = re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b")


@dataclass(frozen=True)
class RingMember:
    state: str  # nodetool's two letters: Up/Down, then Normal/Leaving/Joining/Moving
    address: str
    host_id: str
    datacenter: str


def parse_ring(output: str) -> dict[str, RingMember]:
    """`nodetool status` as ring members by address."""
    members: dict[str, RingMember] = {}
    datacenter = ""
    for line in output.splitlines():
        if line.startswith("Datacenter:"):
            datacenter = line.split(":", 1)[1].strip()
            continue
        found = STATUS_LINE.match(line)
        if found is None:
            continue
        address = found.group(2).split(":")[0]  # an ip:port with --print-port
        host_id = HOST_ID.search(line)
        members[address] = RingMember(
            found.group(1), address, host_id.group(0) if host_id else "", datacenter
        )
    return members


def _ip(instance: Member) -> str:
    return instance.ip


def ring_of(op: Operator, observer: Member) -> dict[str, RingMember]:
    """The ring as the observer (a seed) sees it."""
    return parse_ring(op.run(observer, ["nodetool", "status"], NODETOOL_SECONDS))


def cql(op: Operator, observer: Member, statement: str) -> str:
    """cqlsh on the observer, logged in as the cluster's owner."""
    argv = [
        "cqlsh",
        "--no-color",
        f"--request-timeout={CQLSH_SECONDS - 30}",
        observer.hostname,
        "9042",
        "-e",
        statement,
    ]
    return op.run(observer, argv, CQLSH_SECONDS)


def keyspace_factors(op: Operator, observer: Member) -> dict[str, int]:
    """Each keyspace's replication factor, from system_schema.keyspaces."""
    output = cql(
        op, observer, "SELECT JSON keyspace_name, replication FROM system_schema.keyspaces"
    )
    factors = {}
    for line in output.splitlines():
        if line.strip().startswith("{"):
            row = json.loads(line)
            factors[row["keyspace_name"]] = rules.replication_factor(row["replication"])
    if not factors:
        raise ResizeFailed(f"cqlsh listed no keyspaces: {output.strip()[-200:]}")
    return factors


def _observer(members: list[Member]) -> Member:
    seeds = sorted((i for i in members if i.role == "seed"), key=lambda i: i.index)
    if not seeds:
        raise ResizeFailed("the cluster has no running seed")
    return seeds[0]


def _datacenter(ring: dict[str, RingMember], observer: Member) -> str:
    found = ring.get(_ip(observer))
    return (found.datacenter if found else "") or "dc1"


def _ring_ready(
    ring: dict[str, RingMember],
    members: list[Member],
    doing: str,
    changing: list[Member],
    allowed: tuple[str, ...],
) -> None:
    """Every member, and anything else the ring lists, up and normal (UN); the nodes this
    resize changes may also be in the `allowed` states or not listed (a resumed resize finds
    them joining or leaving, or gone). ResizeFailed naming those that are not."""
    problems = []
    for member in members:
        found = ring.get(_ip(member))
        if found is None or found.state != "UN":
            problems.append(f"{member.hostname} is {found.state if found else 'not in the ring'}")
    for member in changing:
        found = ring.get(_ip(member))
        if found is not None and found.state not in ("UN", *allowed):
            problems.append(f"{member.hostname} is {found.state}")
    ours = {_ip(m) for m in [*members, *changing]}
    problems += [f"{a} is {m.state}" for a, m in ring.items() if a not in ours and m.state != "UN"]
    if problems:
        raise ResizeFailed(
            f"{'; '.join(problems)}: every node must be up and normal (UN in nodetool status) "
            f"before {doing}"
        )


def join(op: Operator, ids: set[int]) -> None:
    """The new nodes join the ring one at a time: each starts only once the one before is UN
    (bootstrapping nodes at once could pick overlapping ranges and stream from nodes about to
    give them away); the seeds are unchanged. Then system_auth is replicated to
    min(3, nodes) and repaired, the product's checks run again, and the older nodes run
    nodetool cleanup. When one does not join, it and those not started are removed and given
    back, those that joined stay, and the older nodes still clean up (ResizeFailed)."""
    members = op.members()
    old = [i for i in members if i.id not in ids]
    new = sorted((i for i in members if i.id in ids), key=lambda i: i.index)
    observer: Member | None = None
    joined: list[Member] = []
    try:
        observer = _observer(old)
        ring = ring_of(op, observer)
        # A resumed resize: those UN joined before the worker died.
        joined = [i for i in new if getattr(ring.get(_ip(i)), "state", "") == "UN"]
        _ring_ready(ring, old, "nodes join", new, ("UJ", "DJ", "DN"))
        op.prepare(ids)
        op.add_hosts(ids)
        for instance in new:
            if instance not in joined:
                _join_one(op, observer, instance)
                joined.append(instance)
    except (ResizeFailed, StepFailed, TimeoutError) as error:
        op.mark_running({i.id for i in joined})
        notes = _drop_joiners(op, observer, [i for i in new if i not in joined])
        if joined:
            _clean_up(op, old)
            stay = ", ".join(i.hostname for i in joined)
            notes.append(f"{stay} joined and stay{'s' if len(joined) == 1 else ''}")
        raise ResizeFailed("; ".join([str(error), *notes])) from error
    try:
        _replicate_auth(op, observer, members, _datacenter(ring, observer))
        op.configure_again()
    except (ResizeFailed, StepFailed, TimeoutError) as error:
        op.mark_running(ids)
        _clean_up(op, old)
        raise ResizeFailed(f"the new nodes joined, but {error}") from error
    _clean_up(op, old)


def _join_one(op: Operator, observer: Member, instance: Member) -> None:
    """Start the node (unless a resumed resize started it) and wait until the observer sees
    it UN, reporting UJ; ResizeFailed when its container stops or past RESIZE_DRAIN_SECONDS."""
    state = op.container_state(instance)
    if state is None:
        # On empty disks: one a removed member kept its data on would make it start as that
        # member, with its host id and tokens (a decommissioned one refuses to start at all).
        op.empty_disks(instance)
    if state != "running":
        op.start(instance, BOOTSTRAP)
    deadline = time.monotonic() + settings.RESIZE_DRAIN_SECONDS
    said, why = "", "not in the ring yet"
    while True:
        try:
            found = ring_of(op, observer).get(_ip(instance))
        except ResizeFailed as error:  # a busy seed's nodetool; asked again
            found, why = None, str(error)
        if found is not None and found.state == "UN":
            op.event(f"{instance.hostname} joined the ring (UN)")
            return
        if found is not None:
            why = found.state
            progress = f"{instance.hostname} is joining the ring ({found.state})"
            if found.state == "UJ":
                progress += ": streaming its share of the data"
            if progress != said:
                op.event(progress)
                said = progress
        if op.container_state(instance) not in ("running", "restarting"):
            raise ResizeFailed(
                f"{instance.hostname} stopped while joining the ring: "
                f"{op.logs(instance, 5).strip()[-300:]}"
            )
        if time.monotonic() > deadline:
            raise ResizeFailed(
                f"{instance.hostname} did not join the ring in {settings.RESIZE_DRAIN_SECONDS} "
                f"s ({why})"
            )
        time.sleep(settings.RESIZE_POLL_SECONDS)


def _drop_joiners(op: Operator, observer: Member | None, instances: list[Member]) -> list[str]:
    """Remove and give back new nodes that did not join (their disks hold nothing worth
    keeping), then see the ring forget them; returns what the user must know if it did not."""
    if not instances:
        return []
    op.remove(instances, keep_data=False)
    if observer is None:
        return []
    notes = []
    for instance in instances:
        note = _forgotten(op, observer, instance)
        if note:
            notes.append(note)
    return notes


def _forgotten(op: Operator, observer: Member, instance: Member) -> str:
    """Wait until the ring no longer lists a removed node: a joining one is forgotten by
    gossip; one that had become a member (DN) is removed with nodetool removenode (its
    ranges streamed from their other copies). Returns a note when it is still listed."""
    deadline = time.monotonic() + FORGET_SECONDS
    removing = False
    while True:
        try:
            found = ring_of(op, observer).get(_ip(instance))
        except ResizeFailed as error:
            return f"whether the ring forgot {instance.hostname} is unknown: {error}"
        if found is None:
            return ""
        if found.state in ("DN", "DL") and found.host_id and not removing:
            op.event(f"nodetool removenode {instance.hostname} ({found.host_id})")
            argv = ["nodetool", "removenode", found.host_id]
            op.run(observer, argv, settings.RESIZE_DRAIN_SECONDS)
            removing = True
            continue
        if time.monotonic() > deadline:
            return (
                f"{instance.hostname} ({found.address}) is still listed in the ring "
                f"({found.state}); nodetool removenode {found.host_id} on a seed removes it"
            )
        time.sleep(settings.RESIZE_POLL_SECONDS)


def _replicate_auth(op: Operator, observer: Member, members: list[Member], datacenter: str) -> None:
    """system_auth to min(3, nodes) copies, as cassandra-auth makes it at launch (and will
    again in the checks), but repaired at once on every node: a node made a replica of the
    owner's role without its data would refuse the owner's logins."""
    wanted = min(3, len(members))
    had = keyspace_factors(op, observer).get("system_auth", 0)
    if had >= wanted:
        return
    cql(
        op,
        observer,
        "ALTER KEYSPACE system_auth WITH replication = "
        f"{{'class': 'NetworkTopologyStrategy', '{datacenter}': {wanted}}}",
    )
    for member in members:  # -pr on every node: each range repaired once
        argv = ["nodetool", "repair", "--full", "-pr", "system_auth"]
        op.run(member, argv, settings.RESIZE_DRAIN_SECONDS)
    op.event(f"system_auth keeps {wanted} copies now (was {had}), repaired on every node")


def _clean_up(op: Operator, old: list[Member]) -> None:
    """nodetool cleanup on the nodes that were there before, one at a time: each drops the
    ranges it gave the new nodes, which it would otherwise keep for ever (and serve again,
    deletes forgotten, should it own them again after a shrink). A cleanup that fails is
    worth a warning, not the resize: the data is where it should be."""
    for member in old:
        try:
            op.run(member, ["nodetool", "cleanup"], settings.RESIZE_DRAIN_SECONDS)
        except (ResizeFailed, TimeoutError) as error:
            op.event(
                f"nodetool cleanup on {member.hostname} did not finish ({error}); the ranges "
                "it gave away stay on its disks until it runs there",
                "warning",
            )
        else:
            op.event(f"nodetool cleanup on {member.hostname}: ranges it gave away dropped")


def drain(op: Operator, leaving: list[Member]) -> None:
    """Refused before anything changes when a node is not UN or a keyspace keeps more copies
    than nodes would stay (rules.ring_shrink_refusal); Cassandra's own keyspaces are lowered
    to the nodes that stay instead. Then each leaving node, the highest index first, runs
    nodetool decommission (streaming its data to the others), and once a seed's ring no
    longer lists it, it is stopped, removed and released before the next one starts."""
    ids = {i.id for i in leaving}
    members = op.members()
    leaving = sorted((i for i in members if i.id in ids), key=lambda i: -i.index)
    staying = [i for i in members if i.id not in ids]
    observer = _observer(staying)
    ring = ring_of(op, observer)
    _ring_ready(ring, staying, "a shrink", leaving, ("UL",))
    factors = keyspace_factors(op, observer)
    refusal = rules.ring_shrink_refusal(factors, len(staying))
    if refusal:
        raise ResizeFailed(refusal)
    datacenter = _datacenter(ring, observer)
    for name in rules.OWN_KEYSPACES:
        if factors.get(name, 0) > len(staying):
            cql(
                op,
                observer,
                f"ALTER KEYSPACE {name} WITH replication = "
                f"{{'class': 'NetworkTopologyStrategy', '{datacenter}': {len(staying)}}}",
            )
            op.event(
                f"{name} keeps {len(staying)} copies now (was {factors[name]}): no more than "
                "the nodes that stay",
            )
    for instance in leaving:
        _decommission(op, observer, instance)
        op.stop([instance])
        op.remove([instance], keep_data=True)


def _decommission(op: Operator, observer: Member, instance: Member) -> None:
    """nodetool decommission on the node (unless a resumed resize started it), followed in
    the observer's ring until the node is gone. When it fails, its container stops, or it runs
    past RESIZE_DRAIN_SECONDS, the node is put back into the ring (ResizeFailed)."""
    name = instance.hostname
    found = ring_of(op, observer).get(_ip(instance))
    if found is None:
        return  # it left before a worker died
    if found.state != "UL":
        admin(op, instance, [ADMIN, "decommission"], 60)
        op.event(f"nodetool decommission on {name}: it streams its data to the others")
    deadline = time.monotonic() + settings.RESIZE_DRAIN_SECONDS
    said = ""
    while True:
        found = ring_of(op, observer).get(_ip(instance))
        if found is None:
            break
        progress = f"{name} is leaving the ring ({found.state})"
        if found.state == "UL":
            progress += ": streaming its data to the others"
        if progress != said and found.state != "UN":  # UN: it has not started leaving yet
            op.event(progress)
            said = progress
        failure = ""
        if not op.running(instance):
            failure = f"{name} stopped while leaving the ring"
        elif (outcome := _decommission_outcome(op, instance)) is not None and outcome[0] != 0:
            failure = f"nodetool decommission on {name} failed: {outcome[1]}"
        elif time.monotonic() > deadline:
            failure = f"the decommission of {name} did not end in {settings.RESIZE_DRAIN_SECONDS} s"
        if failure:
            back = _back_in_ring(op, observer, instance)
            if back is None:
                break
            raise ResizeFailed(f"{failure}; {back}")
        time.sleep(settings.RESIZE_POLL_SECONDS)
    op.event(f"{name} left the ring (decommissioned)")


def _decommission_outcome(op: Operator, instance: Member) -> tuple[int, str] | None:
    """The background nodetool decommission's exit code and last output; None while it runs
    (or when the node cannot say)."""
    try:
        status = admin(op, instance, [ADMIN, "decommission-status"], 30)
    except ResizeFailed:
        return None
    if status.get("exit") is None:
        return None
    return int(status["exit"]), str(status.get("log", ""))


def _back_in_ring(op: Operator, observer: Member, instance: Member) -> str | None:
    """A node whose decommission did not end serves as before: one still leaving (UL) is
    restarted, which ends its decommission (the data it streamed is the others' to clean
    up). Returns how it stands, for the failure's message; None if it left after all."""
    found = ring_of(op, observer).get(_ip(instance))
    if found is None:
        return None
    if found.state == "UN":
        return f"{instance.hostname} stays in the ring"
    op.restart(instance)
    op.event(f"{instance.hostname} restarted: its decommission is abandoned")
    deadline = time.monotonic() + RESTART_SECONDS
    while True:
        found = ring_of(op, observer).get(_ip(instance))
        if found is not None and found.state == "UN":
            return f"{instance.hostname} was restarted and is back in the ring (UN)"
        if time.monotonic() > deadline:
            state = found.state if found else "not in the ring"
            return f"{instance.hostname} was restarted but is {state} after {RESTART_SECONDS} s"
        time.sleep(settings.RESIZE_POLL_SECONDS)
