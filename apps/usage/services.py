"""Usage accounting: what each cluster held, per UTC day, read from the life cycle itself (its
transition events and its disk allocations), never sampled.

- cores and memory: each instance's, over the spans the cluster's containers existed
  (timeline.COMPUTE_STATES) while the instance was a member (a resize adds and removes
  members), so a stop, a start, a failure and a resize split them exactly;
- disks: each DiskAllocation from its reservation to its release, by the disk's kind, stopped
  time included. NVMe disks count as SSD hours (the CSV has HDD and SSD columns).

A row is one cluster on one day; everything else (per user, group, product, day) adds rows up.
Figures run up to ``now`` for clusters still running."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from datetime import date, datetime

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db.models import Count, Exists, Max, Min, OuterRef, Q, QuerySet
from django.utils import timezone

from apps.accounts.models import Quota
from apps.clusters.models import Cluster, ClusterEvent, DiskAllocation, Instance, ResourceChange

from .models import Budget
from .timeline import Span, by_day, compute_spans, day_window, intersect

FIGURES = ("core_h", "mem_gb_h", "hdd_h", "ssd_h")
CSV_COLUMNS = ("date", "user", "group", "cluster", "product", "state", *FIGURES)
GROUPINGS = ("day", "cluster", "product", "user", "group")


@dataclass
class Row:
    date: date
    user: str
    group: str
    cluster_id: int
    cluster: str
    product: str
    state: str
    core_h: float = 0.0
    mem_gb_h: float = 0.0
    hdd_h: float = 0.0
    ssd_h: float = 0.0

    def add(self, figure: str, hours: float) -> None:
        setattr(self, figure, getattr(self, figure) + hours)

    def as_dict(self) -> dict:
        return {**asdict(self), "date": self.date.isoformat()}


@dataclass
class Total:
    key: str
    core_h: float = 0.0
    mem_gb_h: float = 0.0
    hdd_h: float = 0.0
    ssd_h: float = 0.0
    clusters: set[int] = field(default_factory=set)

    def as_dict(self) -> dict:
        figures = {f: round(getattr(self, f), 6) for f in FIGURES}
        return {"key": self.key, **figures, "clusters": len(self.clusters)}


def quota_groups(user_ids: Iterable[int]) -> dict[int, str]:
    """Each user's group for accounting: the first (by name) of their groups that has a quota
    or a budget, else their first group, else none ("")."""
    memberships = Group.objects.filter(user__in=list(user_ids)).annotate(
        counted=Exists(Quota.objects.filter(group=OuterRef("pk")))
        | Exists(Budget.objects.filter(group=OuterRef("pk")))
    )
    found: dict[int, tuple[bool, str]] = {}
    for user_id, name, counted in memberships.values_list("user", "name", "counted"):
        rank = (not counted, name)  # counted groups first, then by name
        if user_id not in found or rank < found[user_id]:
            found[user_id] = rank
    return {user_id: name for user_id, (_, name) in found.items()}


def usage_rows(clusters: QuerySet[Cluster], first: date, last: date, now: datetime | None = None):
    """One Row per cluster and UTC day in [first, last] (both included) with anything held."""
    window = day_window(first, last)
    now = now or timezone.now()
    if now < window.end:
        window = Span(window.start, max(window.start, now))
    chosen = list(
        clusters.filter(created__lt=window.end)
        .filter(Q(destroyed_at__isnull=True) | Q(destroyed_at__gte=window.start))
        .select_related("owner", "version__product")
    )
    ids = [c.id for c in chosen]
    timelines: dict[int, list[tuple[datetime, str]]] = defaultdict(list)
    events = ClusterEvent.objects.filter(cluster_id__in=ids).exclude(state="").order_by("at", "id")
    for cluster_id, at, state in events.values_list("cluster_id", "at", "state"):
        timelines[cluster_id].append((at, state))
    # Each instance counts while it is a member: from its first disk's reservation to its last
    # disk's release (a resize adds and removes members mid-way); without disks, always.
    members = Instance.objects.filter(cluster_id__in=ids).annotate(
        joined=Min("allocations__created"),
        left=Max("allocations__released"),
        holding=Count("allocations", filter=Q(allocations__active=True)),
    )
    # A vertical resize splits a membership: the figures before each change up to it.
    changes: dict[int, list[tuple[datetime, int, int]]] = defaultdict(list)
    for instance_id, at, cores, memory in ResourceChange.objects.filter(
        instance__cluster_id__in=ids
    ).values_list("instance_id", "at", "cores_before", "memory_mb_before"):
        changes[instance_id].append((at, cores, memory))
    shapes: dict[int, list[tuple[int, int, Span]]] = defaultdict(list)
    for instance_id, cluster_id, cores, memory, joined, left, holding in members.values_list(
        "id", "cluster_id", "cores", "memory_mb", "joined", "left", "holding"
    ):
        start = joined or window.start
        end = now if holding or left is None else left
        start = min(start, end)
        for at, cores_then, memory_then in sorted(changes[instance_id]):
            cut = min(max(at, start), end)
            shapes[cluster_id].append((cores_then, memory_then, Span(start, cut)))
            start = cut
        shapes[cluster_id].append((cores, memory, Span(start, end)))
    disks: dict[int, list[tuple[Span, str]]] = defaultdict(list)
    allocations = DiskAllocation.objects.filter(instance__cluster_id__in=ids).filter(
        Q(released__isnull=True) | Q(released__gte=window.start), created__lt=window.end
    )
    for cluster_id, created, released, kind in allocations.values_list(
        "instance__cluster_id", "created", "released", "disk__kind"
    ):
        disks[cluster_id].append((Span(created, released or now), kind))

    groups = quota_groups({c.owner_id for c in chosen})
    rows: dict[tuple[int, date], Row] = {}

    def row(cluster: Cluster, day: date) -> Row:
        key = (cluster.id, day)
        if key not in rows:
            rows[key] = Row(
                day,
                cluster.owner.get_username(),
                groups.get(cluster.owner_id, ""),
                cluster.id,
                cluster.name,
                cluster.version.product.name,
                cluster.state,
            )
        return rows[key]

    for cluster in chosen:
        running = intersect(compute_spans(timelines[cluster.id], now), window)
        for cores, memory, membership in shapes[cluster.id]:
            for span in intersect(running, membership):
                for day, seconds in by_day(span):
                    row(cluster, day).add("core_h", cores * seconds / 3600)
                    row(cluster, day).add("mem_gb_h", memory / 1024 * seconds / 3600)
        for held, kind in disks[cluster.id]:
            figure = "hdd_h" if kind == "hdd" else "ssd_h"
            for span in intersect([held], window):
                for day, seconds in by_day(span):
                    row(cluster, day).add(figure, seconds / 3600)
    return sorted(rows.values(), key=lambda r: (r.date, r.user, r.cluster_id))


def totals(rows: Iterable[Row], group_by: str) -> list[Total]:
    """Rows added up by day, cluster, product, user or group (in key order)."""
    if group_by not in GROUPINGS:
        raise ValueError(f"group_by must be one of {', '.join(GROUPINGS)}, got {group_by!r}")
    sums: dict[str, Total] = {}
    for r in rows:
        key = {
            "day": r.date.isoformat(),
            "cluster": f"{r.user}/{r.cluster}#{r.cluster_id}",
            "product": r.product,
            "user": r.user,
            "group": r.group,
        }[group_by]
        total = sums.setdefault(key, Total(key))
        for figure in FIGURES:
            setattr(total, figure, getattr(total, figure) + getattr(r, figure))
        total.clusters.add(r.cluster_id)
    return [sums[k] for k in sorted(sums)]


def grand_total(rows: Iterable[Row]) -> dict[str, float]:
    rows = list(rows)
    return {f: round(sum(getattr(r, f) for r in rows), 6) for f in FIGURES}


def visible_clusters(user, *, everyone: bool = False, username: str = "", group: str = ""):
    """The clusters whose usage ``user`` may read: their own; staff everyone's (``everyone``),
    narrowed to one user or quota group when asked."""
    clusters = Cluster.objects.visible_to(user)
    if not everyone:
        clusters = clusters.filter(owner=user)
    if username:
        clusters = clusters.filter(owner__username=username)
    if group:
        members = get_user_model().objects.filter(groups__name=group)
        clusters = clusters.filter(owner__in=members)
    return clusters


def all_time_by_group(now: datetime | None = None) -> dict[str, dict[str, float]]:
    """Every figure since the first cluster, per quota group ("" for users in none): the
    counters /metrics exports. Reads every cluster's life, so /metrics caches it a minute."""
    now = now or timezone.now()
    first = Cluster.objects.order_by("created").values_list("created", flat=True).first()
    if first is None:
        return {}
    rows = usage_rows(Cluster.objects.all(), first.date(), now.date(), now)
    return {t.key: t.as_dict() for t in totals(rows, "group")}
