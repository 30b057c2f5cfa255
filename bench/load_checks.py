"""bench/load's checks once the load settled, read straight from the database (the ORM) and
the nodes: nothing a cluster held may be left held, double-booked or over a limit."""

import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from django.utils.dateparse import parse_datetime

from bench.load_users import Recorder

ENDED = ("destroyed", "failed")
WORKING = ("placing", "configuring", "stopping", "destroying")


@dataclass
class Check:
    name: str
    problems: list[str]

    @property
    def passed(self) -> bool:
        return not self.problems


def wait_until_settled(owner_ids: list[int], seconds: float) -> None:
    """The users saw their clusters destroyed; also wait out work still on a worker."""
    from apps.clusters.models import Cluster

    deadline = time.monotonic() + seconds
    working = Cluster.objects.filter(owner__in=owner_ids, state__in=WORKING)
    while working.exists() and time.monotonic() < deadline:
        time.sleep(0.5)


def consistency_checks(recorder: Recorder, owner_ids: list[int], site: str) -> list[Check]:
    answered = recorder.server_errors()
    return [
        Check(
            f"every request answered below 500 ({len(recorder.samples)} requests)",
            [f"{s.kind} at {s.at:.1f} s: {s.status or 'no answer'}" for s in answered],
        ),
        Check("no disk held by two active allocations", disks_held_twice()),
        Check("allocated disks are exactly those of active instances", disk_states()),
        Check("no address held twice; held flags match active instances", address_states()),
        Check("no node over its cores or memory", nodes_over_capacity()),
        Check("no user over quota", users_over_quota()),
        Check("every cluster of the run destroyed, holding nothing", clusters_left(owner_ids)),
        Check(
            f"no container labelled platter.site={site} but those of active instances",
            containers_left(site),
        ),
    ]


def disks_held_twice() -> list[str]:
    from django.db.models import Count

    from apps.clusters.models import DiskAllocation

    twice = DiskAllocation.objects.filter(active=True).values("disk").annotate(n=Count("id"))
    return [f"disk {row['disk']}: {row['n']} active allocations" for row in twice if row["n"] > 1]


def disk_states() -> list[str]:
    from django.db.models import Count, F, Q

    from apps.clusters.models import DiskAllocation, Instance
    from apps.inventory.models import Disk

    held = set(
        DiskAllocation.objects.filter(active=True, instance__active=True).values_list(
            "disk_id", flat=True
        )
    )
    allocated = set(Disk.objects.filter(state=Disk.State.ALLOCATED).values_list("id", flat=True))
    problems = [f"disk {d} is allocated but no active instance holds it" for d in allocated - held]
    problems += [
        f"disk {d} is held by an active instance but not allocated" for d in held - allocated
    ]
    stray = DiskAllocation.objects.filter(active=True, instance__active=False)
    problems += [
        f"allocation {a.id}: disk {a.disk_id} held by released {a.instance}" for a in stray
    ]
    counted = Instance.objects.filter(active=True).annotate(
        held=Count("allocations", filter=Q(allocations__active=True)),
        of_kind=Count(
            "allocations",
            filter=Q(allocations__active=True, allocations__disk__kind=F("disk_kind")),
        ),
    )
    problems += [
        f"instance {i.id} asked {i.disks} {i.disk_kind} disks: holds {i.held}, {i.of_kind} of them"
        for i in counted
        if i.held != i.disks or i.of_kind != i.disks
    ]
    return problems


def address_states() -> list[str]:
    from django.db.models import Count

    from apps.clusters.models import Instance
    from apps.inventory.models import Address

    active = Instance.objects.filter(active=True, address__isnull=False)
    twice = active.values("address__ip").annotate(n=Count("id")).filter(n__gt=1)
    problems = [f"address {row['address__ip']}: {row['n']} active holders" for row in twice]
    used = set(active.values_list("address_id", flat=True))
    held = set(Address.objects.filter(held=True).values_list("id", flat=True))
    problems += [f"address {a} is held but no active instance has it" for a in held - used]
    problems += [f"address {a} is used by an active instance but not held" for a in used - held]
    return problems


def nodes_over_capacity() -> list[str]:
    from django.db.models import Q, Sum

    from apps.inventory.models import Node

    active = Q(instances__active=True)
    nodes = Node.objects.annotate(
        used_cores=Sum("instances__cores", filter=active),
        used_memory=Sum("instances__memory_mb", filter=active),
    )
    return [
        f"{n.name}: {n.used_cores} of {n.cores} cores, {n.used_memory} of {n.memory_mb} MB"
        for n in nodes
        if (n.used_cores or 0) > n.cores or (n.used_memory or 0) > n.memory_mb
    ]


def usage_of(owner_ids: list[int]) -> dict[str, int]:
    """What the owners hold, counted from the allocations themselves (not the quota code's own
    count): live clusters, active instances with their cores and memory, disks by kind."""
    from django.db.models import Count, Sum

    from apps.clusters.models import LIVE_STATES, Cluster, DiskAllocation, Instance

    active = Instance.objects.filter(cluster__owner__in=owner_ids, active=True)
    sums = active.aggregate(n=Count("id"), cores=Sum("cores"), memory=Sum("memory_mb"))
    disks = Counter(
        DiskAllocation.objects.filter(instance__in=active, active=True).values_list(
            "disk__kind", flat=True
        )
    )
    used = {
        "max_clusters": Cluster.objects.filter(owner__in=owner_ids, state__in=LIVE_STATES).count(),
        "max_instances": sums["n"],
        "max_cores": sums["cores"] or 0,
        "max_memory_mb": sums["memory"] or 0,
        "max_disks": sum(disks.values()),
    }
    used.update({f"max_disks_{kind}": count for kind, count in disks.items()})
    return used


def users_over_quota() -> list[str]:
    from django.conf import settings
    from django.contrib.auth import get_user_model

    from apps.accounts.models import Quota

    problems = []
    owners = get_user_model().objects.filter(clusters__isnull=False).distinct()
    for user in owners.select_related("quota"):
        own = getattr(user, "quota", None)
        limits = own.limits() if own else settings.SCHEDULER_DEFAULT_QUOTA
        problems += over(f"user {user.username}", usage_of([user.id]), limits)
    for quota in Quota.objects.filter(group__isnull=False).select_related("group"):
        group = quota.group
        assert group is not None  # filtered on it
        members = list(group.user_set.values_list("id", flat=True))
        problems += over(f"group {group.name}", usage_of(members), quota.limits())
    return problems


def over(scope: str, used: dict[str, int], limits: Mapping[str, int | None]) -> list[str]:
    return [
        f"{scope}: {name} is {limit}, holds {used.get(name, 0)}"
        for name, limit in limits.items()
        if limit is not None and used.get(name, 0) > limit
    ]


def clusters_left(owner_ids: list[int]) -> list[str]:
    from django.db.models import Q

    from apps.clusters.models import Cluster

    clusters = Cluster.objects.filter(owner__in=owner_ids)
    left = clusters.exclude(state="destroyed")
    problems = [f"cluster {c.id} ({c.owner}) is {c.state}: {c.reason}" for c in left]
    ended_holding = (
        clusters.filter(state__in=ENDED)
        .filter(Q(instances__active=True) | Q(instances__allocations__active=True))
        .distinct()
    )
    problems += [f"cluster {c.id} is {c.state} but still holds resources" for c in ended_holding]
    return problems


def containers_left(site: str) -> list[str]:
    """Containers on the nodes with our site label must belong to active instances there."""
    from apps.clusters.models import Instance
    from apps.inventory.models import Node
    from apps.nodes import engine

    problems = []
    for node in Node.objects.all():
        owned = {
            str(i)
            for i in Instance.objects.filter(node=node, active=True).values_list("id", flat=True)
        }
        try:
            # ignore_removed: a container gone between the listing and its inspection (a
            # helper ending) is not one left behind.
            found = engine.cached(node).containers.list(
                all=True, filters={"label": f"platter.site={site}"}, ignore_removed=True
            )
        except Exception as error:  # noqa: BLE001 (a silent node is a failed check, not a crash)
            problems.append(f"{node.name} did not answer: {error}")
            continue
        problems += [
            f"{node.name}: {c.name} ({c.status})"
            for c in found
            if c.labels.get("platter.instance") not in owned
            and not helper_at_work(c.labels, c.attrs.get("State") or {})
        ]
    return problems


# How long a helper that ended may stay before it counts as left behind: its starter reads
# its output and then removes it, a round trip that over SSH can take seconds.
HELPER_REMOVAL_GRACE = timedelta(seconds=60)


def helper_at_work(labels: dict[str, str], state: dict, now: datetime | None = None) -> bool:
    """A helper (the perimeter's rules, a wipe) running, or ended moments ago and about to
    be removed by whoever started it, is the portal's own; one that ended long ago and
    stayed is a leftover."""
    if "platter.helper" not in labels:
        return False
    if state.get("Running"):
        return True
    finished = parse_datetime(state.get("FinishedAt") or "")
    now = now or datetime.now(UTC)
    return finished is not None and finished.year > 1 and now - finished < HELPER_REMOVAL_GRACE
