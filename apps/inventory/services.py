"""Inventory rules: address pools, node and disk states, disk benchmark results and slow disks."""

import dataclasses
import ipaddress
import statistics
from collections import defaultdict
from collections.abc import Iterable, Iterator
from ipaddress import IPv4Address, IPv4Network, IPv6Network
from typing import Any

from django.conf import settings
from django.db import transaction
from django.dispatch import Signal
from django.utils import timezone

from apps.audit.services import Action, Actor, record

from .models import Address, Disk, Network, Node


class AddressRangeError(ValueError):
    """A network's first/last addresses do not form a usable range."""


def address_range(network: Network) -> list[str]:
    first, last = IPv4Address(network.first_address), IPv4Address(network.last_address)
    if last < first:
        raise AddressRangeError(f"{network.name}: last address {last} is before first {first}")
    gateway = IPv4Address(network.gateway)
    return [str(IPv4Address(n)) for n in range(int(first), int(last) + 1) if n != int(gateway)]


def sync_addresses(network: Network) -> int:
    """Create the Address rows of the network's range that are missing and drop the free ones
    outside it; held ones stay until released (the next sync drops them). Returns how many
    were created."""
    wanted = address_range(network)
    Address.objects.filter(network=network, held=False).exclude(ip__in=wanted).delete()
    existing = set(Address.objects.filter(network=network).values_list("ip", flat=True))
    missing = [Address(network=network, ip=ip) for ip in wanted if ip not in existing]
    Address.objects.bulk_create(missing, batch_size=5000, ignore_conflicts=True)
    return len(missing)


# The audit action of each state a node is put in.
NODE_STATE_ACTIONS: dict[str, str] = {
    Node.State.ACTIVE: Action.NODE_ACTIVATE,
    Node.State.DRAINING: Action.NODE_DRAIN,
    Node.State.DOWN: Action.NODE_DOWN,
    Node.State.MAINTENANCE: Action.NODE_MAINTENANCE,
}


@transaction.atomic
def set_node_state(node_id: int, state: str, *, actor: Actor = None, reason: str = "") -> bool:
    """Draining keeps running instances but stops new placements; the node row lock makes
    the change wait for (and be seen by) reservations in flight on that node. Returns False
    (and audits nothing) when the node already was in that state."""
    node = Node.objects.select_for_update().get(id=node_id)
    if node.state == state:
        return False
    previous, node.state = node.state, state
    node.save(update_fields=["state"])
    why: dict[str, Any] = {"reason": reason} if reason else {}
    record(NODE_STATE_ACTIONS[state], actor, node, previous=previous, **why)
    if state == Node.State.ACTIVE:
        capacity_freed()
    return True


# Sent when a node or a disk is back in service, so capacity came back. The clusters app,
# above the inventory, connects its admission queue's wake-up to it (ClustersConfig.ready and
# apps/clusters/wakeup.py): the inventory names no queue.
capacity_back = Signal()


def capacity_freed() -> None:
    """Offer the queue the capacity that came back (a node or disk in service again, images
    landed on nodes), once this commits (the periodic pass is only a net)."""
    capacity_back.send(sender=Node)


def record_images(node_name: str, images: list[str]) -> None:
    """The images a node holds now (an image preparation landed some; the reconciler's checks
    record them too)."""
    Node.objects.filter(name=node_name).update(images=sorted(images))


@transaction.atomic
def record_health_check(
    node_id: int, *, error: str = "", images: list[str] | None = None
) -> str | None:
    """The reconciler's check of a node (answered when `error` is empty), under the row lock
    set_node_state takes, so an admin's change in flight is never overwritten. A node that
    fails NODE_DOWN_AFTER_FAILED_CHECKS checks in a row is marked down; one the checks marked
    down comes back when it answers (an admin's down stays). Returns "down", "up" or None."""
    node = Node.objects.select_for_update().get(id=node_id)
    if not error:
        node.failed_checks, node.last_seen = 0, timezone.now()
        fields = ["failed_checks", "last_seen"]
        if images is not None:
            node.images = images
            fields.append("images")
        back_up = node.state == Node.State.DOWN and node.down_by_health_check
        if back_up:
            node.state, node.down_by_health_check = Node.State.ACTIVE, False
            fields += ["state", "down_by_health_check"]
        node.save(update_fields=fields)
        if back_up:
            record(
                Action.NODE_ACTIVATE,
                None,
                node,
                previous=Node.State.DOWN,
                reason="answers health checks again",
            )
            capacity_freed()
        return "up" if back_up else None
    node.failed_checks += 1
    fields = ["failed_checks"]
    going_down = node.failed_checks >= settings.NODE_DOWN_AFTER_FAILED_CHECKS and node.state in (
        Node.State.ACTIVE,
        Node.State.DRAINING,
    )
    previous = node.state
    if going_down:
        node.state, node.down_by_health_check = Node.State.DOWN, True
        fields += ["state", "down_by_health_check"]
    node.save(update_fields=fields)
    if going_down:
        record(
            Action.NODE_DOWN,
            None,
            node,
            previous=previous,
            reason=f"does not answer health checks: {error}",
        )
        return "down"
    return None


DISK_STATE_ACTIONS: dict[str, str] = {
    Disk.State.FAILED: Action.DISK_FAIL,
    Disk.State.RETIRED: Action.DISK_RETIRE,
    Disk.State.AVAILABLE: Action.DISK_AVAILABLE,
}


@dataclasses.dataclass
class DiskMarks:
    changed: list[Disk] = dataclasses.field(default_factory=list)
    refused: list[str] = dataclasses.field(default_factory=list)  # why a disk was left as it was


@transaction.atomic
def set_disk_state(disk_ids: Iterable[int], state: str, *, actor: Actor = None) -> DiskMarks:
    """Mark disks failed, retired or available again, audited one by one.

    A disk in use keeps its allocation when failed or retired: its instance goes on, and
    release leaves it out of the pool. Only a disk nobody holds becomes available; "allocated"
    belongs to the reservation. The rows are locked in id order, so a reservation picking
    disks (SKIP LOCKED) passes over them until this commits, and one that already took a disk
    is waited for, then seen."""
    if state not in DISK_STATE_ACTIONS:
        raise ValueError(f"a disk cannot be marked {str(state)!r} by hand")
    marks = DiskMarks()
    disks = Disk.objects.select_for_update(of=("self",)).select_related("node")
    for disk in disks.filter(id__in=list(disk_ids)).order_by("id"):
        if disk.state == state:
            continue
        holder = disk.allocations.filter(active=True).select_related("instance__cluster").first()
        if state == Disk.State.AVAILABLE and holder is not None:
            marks.refused.append(f"{disk} is held by {holder.holder}")
            continue
        previous, disk.state = disk.state, state
        disk.save(update_fields=["state"])
        in_use: dict[str, Any] = {"held_by": holder.holder} if holder else {}
        record(DISK_STATE_ACTIONS[state], actor, disk, previous=previous, **in_use)
        marks.changed.append(disk)
    if state == Disk.State.AVAILABLE and marks.changed:
        capacity_freed()
    return marks


def cluster_network() -> Network | None:
    """The shared network cluster addresses come from when no isolated one is free:
    SCHEDULER_NETWORK by name, else the first."""
    networks = Network.objects.filter(isolated=False).order_by("id")
    if settings.SCHEDULER_NETWORK:
        networks = networks.filter(name=settings.SCHEDULER_NETWORK)
    return networks.first()


class SegmentError(ValueError):
    """The segments asked for cannot be made; the message says why."""


@transaction.atomic
def add_segments(pool: str, vlans: range, prefix: int = 24) -> list[Network]:
    """Isolated cluster networks for a site: one per VLAN id, each the next /prefix of pool.
    Every node's macvlan for a segment hangs off `<node's network_parent>.<vlan>`."""
    try:
        subnets: Iterator[IPv4Network | IPv6Network] = ipaddress.ip_network(pool).subnets(
            new_prefix=prefix
        )
    except ValueError as error:
        raise SegmentError(f"pool {pool!r}: {error}") from None
    if not vlans or vlans[0] < 1 or vlans[-1] > 4094:
        raise SegmentError(f"VLAN ids must lie in 1-4094, not {vlans[0]}-{vlans[-1]}")
    existing = [ipaddress.ip_network(n.subnet) for n in Network.objects.all()]
    made = []
    for vlan in vlans:
        subnet = next(subnets, None)
        if subnet is None:
            raise SegmentError(f"{pool} holds fewer than {len(vlans)} /{prefix} subnets")
        clash = next((other for other in existing if subnet.overlaps(other)), None)
        if clash is not None:
            raise SegmentError(f"{subnet} overlaps the existing network {clash}")
        if Network.objects.filter(vlan=vlan).exists():
            raise SegmentError(f"VLAN {vlan} already has a network")
        hosts = list(subnet.hosts())
        if len(hosts) < 4:
            raise SegmentError(f"/{prefix} is too small for a cluster network")
        network = Network.objects.create(
            name=f"vlan-{vlan}",
            subnet=str(subnet),
            gateway=str(hosts[0]),
            first_address=str(hosts[1]),
            last_address=str(hosts[-1]),
            isolated=True,
            vlan=vlan,
        )
        made.append(network)
    return made


# ---------------------------------------------------------------- disk benchmarks

BENCH_LABELS = {
    "seq_read_mbps": "seq read MB/s",
    "seq_write_mbps": "seq write MB/s",
    "rand_read_iops_qd1": "rand read IOPS QD1",
    "rand_write_iops_qd1": "rand write IOPS QD1",
    "rand_read_iops_qd64": "rand read IOPS QD64",
    "rand_write_iops_qd64": "rand write IOPS QD64",
}


def kind_from_measurement(results: dict[str, float], current: str) -> str:
    """The kind a disk's random 4 KiB read IOPS at queue depth 1 say it is: a spindle seeks
    for every read, flash does not. NVMe is kept (fio cannot tell it from SATA flash)."""
    iops = results.get("rand_read_iops_qd1") or 0
    if iops >= settings.BENCH_SSD_MIN_IOPS:
        return current if current == Disk.Kind.NVME else Disk.Kind.SSD
    return Disk.Kind.HDD


@transaction.atomic
def record_benchmark(disk_id: int, results: dict[str, float], set_kind: bool = False) -> Disk:
    """Store one disk's fio results (fields of Disk.BENCH_FIELDS) and when they were taken;
    with set_kind, also the kind the measurement suggests."""
    disk = Disk.objects.select_for_update().get(id=disk_id)
    for field in Disk.BENCH_FIELDS:
        setattr(disk, field, results.get(field))
    disk.measured_at = timezone.now()
    fields = [*Disk.BENCH_FIELDS, "measured_at"]
    if set_kind:
        disk.kind = kind_from_measurement(results, disk.kind)
        fields.append("kind")
    disk.save(update_fields=fields)
    return disk


def slow_disk_reasons(disks: Iterable[Disk], percent: int, scope: str = "node") -> dict[int, str]:
    """Disks with a result below `percent` % of the median of their measured siblings of the
    same kind (on the same node, or in the whole pool with scope="pool"), with why. A failing
    disk often still works, only much slower: this is how it shows."""
    groups: dict[tuple, list[Disk]] = defaultdict(list)
    for disk in disks:
        if disk.measured_at is not None:
            groups[(disk.node_id if scope == "node" else None, disk.kind)].append(disk)
    reasons: dict[int, list[str]] = defaultdict(list)
    for siblings in groups.values():
        for field in Disk.BENCH_FIELDS:
            values = [getattr(d, field) for d in siblings if getattr(d, field) is not None]
            if len(values) < 2:
                continue  # nothing to compare with
            median = statistics.median(values)
            for disk in siblings:
                value = getattr(disk, field)
                if value is not None and value < median * percent / 100:
                    reasons[disk.id].append(
                        f"{BENCH_LABELS[field]} {value:.0f} < {percent}% of median {median:.0f}"
                    )
    return {disk_id: "; ".join(texts) for disk_id, texts in reasons.items()}


def refresh_slow_flags() -> int:
    """Recompute every disk's slow_reason from the stored results (settings DISK_SLOW_*);
    returns how many disks are flagged."""
    disks = list(Disk.objects.exclude(state=Disk.State.RETIRED))
    reasons = slow_disk_reasons(disks, settings.DISK_SLOW_PERCENT, settings.DISK_SLOW_SCOPE)
    changed = []
    for disk in disks:
        reason = reasons.get(disk.id, "")[:255]
        if disk.slow_reason != reason:
            disk.slow_reason = reason
            changed.append(disk)
    Disk.objects.bulk_update(changed, ["slow_reason"])
    return len(reasons)
