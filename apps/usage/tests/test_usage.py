"""Usage from the life cycle itself: a cluster's real transitions and disk reservations (the
scheduler's own code) with their times set afterwards, then read back as figures."""

from datetime import UTC, date, datetime, timedelta

import pytest

from apps.clusters.models import Cluster, ClusterEvent, DiskAllocation
from apps.clusters.reservation import reserve
from apps.clusters.services import finish_destroy, request_destroy
from apps.clusters.tests.factories import make_cluster, make_node, wants
from apps.clusters.transitions import transition
from apps.usage.services import grand_total, totals, usage_rows, visible_clusters
from apps.usage.timeline import Span, by_day, compute_spans

pytestmark = pytest.mark.django_db
S = Cluster.State
T0 = datetime(2026, 3, 9, 10, 0, tzinfo=UTC)


def live(owner, cores=2, memory_mb=2048, disks=1, count=1) -> Cluster:
    """A cluster reserved by the real reservation and moved on to running."""
    make_node()
    cluster = make_cluster(owner, wants(count, cores=cores, memory_mb=memory_mb, disks=disks))
    reserve(cluster.id)
    assert transition(cluster.id, S.PLACING, S.CONFIGURING)
    assert transition(cluster.id, S.CONFIGURING, S.RUNNING)
    return cluster


def set_times(cluster: Cluster, when: dict[str, datetime]) -> None:
    """Put the cluster's transition events (by the state entered) and its disks' reservation
    and release at the given times."""
    for event in ClusterEvent.objects.filter(cluster=cluster).exclude(state=""):
        event.at = when.get(event.state, when["queued"])
        event.save(update_fields=["at"])
    Cluster.objects.filter(id=cluster.id).update(
        created=when["queued"], destroyed_at=when.get("destroyed")
    )
    allocations = DiskAllocation.objects.filter(instance__cluster=cluster)
    allocations.update(created=when["placing"])
    if "destroyed" in when:
        allocations.update(released=when["destroyed"])


def test_two_cores_running_2_min_stopped_1_min_then_destroyed(alice):
    cluster = live(alice, cores=2, memory_mb=3072, disks=2)
    assert transition(cluster.id, S.RUNNING, S.STOPPING)
    assert transition(cluster.id, S.STOPPING, S.STOPPED)
    request_destroy(cluster.id, keep_data=False)
    finish_destroy(cluster.id)
    set_times(
        cluster,
        {
            "queued": T0 - timedelta(seconds=2),
            "placing": T0 - timedelta(seconds=1),
            "configuring": T0,
            "running": T0 + timedelta(seconds=1),
            "stopping": T0 + timedelta(minutes=2),
            "stopped": T0 + timedelta(minutes=2),
            "destroying": T0 + timedelta(minutes=3),
            "destroyed": T0 + timedelta(minutes=3),
        },
    )
    rows = usage_rows(Cluster.objects.all(), T0.date(), T0.date(), now=T0 + timedelta(hours=1))
    assert len(rows) == 1
    (row,) = rows
    assert row.core_h * 60 == pytest.approx(4, abs=2 / 60)  # 2 cores x 2 minutes
    assert row.mem_gb_h * 60 == pytest.approx(6, abs=3 / 60)  # 3 GB x 2 minutes
    # Two disks held from reservation to release, stopped minute included: 2 x 3 minutes.
    assert row.hdd_h * 60 == pytest.approx(6 + 2 / 60, abs=2 / 60)
    assert row.ssd_h == 0
    assert (row.user, row.cluster, row.product, row.state) == (
        "alice",
        cluster.name,
        "demo",
        "destroyed",
    )


def test_a_stop_and_start_split_the_core_hours_exactly(alice):
    cluster = live(alice, cores=4, disks=1)
    assert transition(cluster.id, S.RUNNING, S.STOPPING)
    assert transition(cluster.id, S.STOPPING, S.STOPPED)
    assert transition(cluster.id, S.STOPPED, S.CONFIGURING)
    # Both "configuring" events get the same time here; what matters is the run's end.
    timeline = [
        (T0, "placing"),
        (T0, "configuring"),
        (T0 + timedelta(minutes=10), "stopping"),
        (T0 + timedelta(minutes=10), "stopped"),
        (T0 + timedelta(minutes=30), "configuring"),
        (T0 + timedelta(minutes=31), "running"),
    ]
    spans = compute_spans(timeline, until=T0 + timedelta(minutes=40))
    assert [s.seconds / 60 for s in spans] == [10, 10]


def test_a_running_cluster_counts_up_to_now_and_a_day_boundary_splits_it(alice):
    cluster = live(alice, cores=2, disks=1)
    midnight = datetime(2026, 3, 10, tzinfo=UTC)
    set_times(
        cluster,
        {
            "queued": midnight - timedelta(hours=1),
            "placing": midnight - timedelta(hours=1),
            "configuring": midnight - timedelta(hours=1),
            "running": midnight - timedelta(hours=1),
        },
    )
    now = midnight + timedelta(hours=3)
    rows = usage_rows(Cluster.objects.all(), date(2026, 3, 9), date(2026, 3, 10), now=now)
    assert [(r.date, round(r.core_h, 6), round(r.hdd_h, 6)) for r in rows] == [
        (date(2026, 3, 9), 2.0, 1.0),
        (date(2026, 3, 10), 6.0, 3.0),
    ]
    only_the_second = usage_rows(Cluster.objects.all(), date(2026, 3, 10), date(2026, 3, 10), now)
    assert [r.core_h for r in only_the_second] == [pytest.approx(6.0)]


def test_totals_by_any_grouping_add_up_to_the_rows(alice, bob):
    for owner in (alice, bob):
        cluster = live(owner, cores=1, disks=1)
        set_times(cluster, dict.fromkeys(["queued", "placing", "configuring", "running"], T0))
    rows = usage_rows(Cluster.objects.all(), T0.date(), T0.date(), now=T0 + timedelta(hours=2))
    whole = grand_total(rows)
    assert whole["core_h"] == pytest.approx(4.0)
    for grouping in ("day", "cluster", "product", "user", "group"):
        added = sum(t.core_h for t in totals(rows, grouping))
        assert added == pytest.approx(whole["core_h"]), grouping
    assert [t.key for t in totals(rows, "user")] == ["alice", "bob"]


def test_one_user_sees_only_their_own_and_staff_everyone(alice, bob, admin_user):
    live(alice)
    live(bob)
    assert {c.owner for c in visible_clusters(alice)} == {alice}
    assert {c.owner for c in visible_clusters(alice, everyone=True)} == {alice}
    assert {c.owner for c in visible_clusters(admin_user, everyone=True)} == {alice, bob}


def test_a_span_over_three_days_is_cut_at_each_utc_midnight():
    span = Span(datetime(2026, 1, 1, 23, tzinfo=UTC), datetime(2026, 1, 3, 1, tzinfo=UTC))
    assert [(d.day, s / 3600) for d, s in by_day(span)] == [(1, 1.0), (2, 24.0), (3, 1.0)]


def test_a_resize_mid_way_counts_each_instance_only_while_it_is_a_member(alice):
    """Grown at 11:00 by one instance (reserved by the resize's own reservation), shrunk at
    12:00 by the first one (its disk released): each counts only its own hour(s)."""
    from apps.clusters.models import Instance
    from apps.clusters.reservation import Rejection, reserve_added

    cluster = live(alice, cores=2, disks=1)
    set_times(cluster, dict.fromkeys(["queued", "placing", "configuring", "running"], T0))
    first = Instance.objects.get(cluster=cluster)
    added = Instance.objects.create(
        cluster=cluster, role="worker", index=1, cores=4, memory_mb=1024, disks=1
    )
    make_node()
    assert transition(cluster.id, S.RUNNING, S.RESIZING)
    reserved = reserve_added(cluster.id, [added.id])
    assert not isinstance(reserved, Rejection), reserved
    assert transition(cluster.id, S.RESIZING, S.RUNNING)
    ClusterEvent.objects.filter(cluster=cluster, state__in=["resizing", "running"]).update(at=T0)
    DiskAllocation.objects.filter(instance=added).update(created=T0 + timedelta(hours=1))
    DiskAllocation.objects.filter(instance=first).update(
        active=False, released=T0 + timedelta(hours=2)
    )
    rows = usage_rows(Cluster.objects.all(), T0.date(), T0.date(), now=T0 + timedelta(hours=3))
    (row,) = rows
    # first: 2 cores 10:00-12:00; added: 4 cores 11:00-13:00 (now)
    assert row.core_h == pytest.approx(2 * 2 + 4 * 2)
    assert row.hdd_h == pytest.approx(2 + 2)
