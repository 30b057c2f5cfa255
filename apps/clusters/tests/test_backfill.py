"""Backfill that never delays the head of the queue (apps/clusters/backfill.py), against the
real database: one test per rule, the reasons a user reads, a launch that must not jump the
queue, and a simulated timeline where backfill never starts the head later than strict order."""

from datetime import timedelta

import pytest
from django.db import transaction
from django.utils import timezone
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from apps.accounts.models import Quota
from apps.clusters import backfill, queue_position
from apps.clusters.admission import admit_queued, reserve_or_fail
from apps.clusters.models import LIVE_STATES, Cluster
from apps.clusters.reservation import Rejection, Reservation, reserve
from apps.clusters.services import request_destroy
from portal.testing import examples

from .factories import destroy_now, make_cluster, make_network, make_node, wants

pytestmark = pytest.mark.django_db


@pytest.fixture
def backfilling(settings):
    settings.SCHEDULER_QUEUE_BACKFILL = True
    settings.SCHEDULER_ADMIT_ON_RELEASE = False  # each test admits when it says so
    make_network()


def waiting_head(alice, running_lease: float | None = 2):
    """One node of 3 HDDs; a running cluster holds one of them (its lease ends in
    `running_lease` hours); the head asks for all three, so it waits for that lease."""
    make_node(disks={"hdd": 3})
    running = make_cluster(alice, wants(1, disks=1), lease_hours=running_lease)
    assert isinstance(reserve(running.id), Reservation)
    head = make_cluster(alice, wants(1, disks=3), name="big")
    return running, head


def state(cluster: Cluster) -> str:
    cluster.refresh_from_db()
    return cluster.state


def test_the_shadow_time_is_when_the_lease_holding_the_heads_disks_ends(alice, backfilling):
    running, head = waiting_head(alice)
    shadow = backfill.shadow_of(head.id)
    assert shadow.head_id == head.id
    assert shadow.at == running.expires_at


def test_a_cluster_whose_lease_ends_before_the_head_can_start_goes_ahead(alice, backfilling):
    running, head = waiting_head(alice)
    short = make_cluster(alice, wants(1, disks=1), lease_hours=1)
    assert admit_queued() == [short.id]
    assert state(head) == "queued"
    when = f"{running.expires_at:%Y-%m-%d %H:%M} UTC"
    assert head.reason.endswith(
        f"; first in the queue: can start by {when} when leases end; later clusters go ahead "
        "only if their leases end by then"
    )
    assert queue_position.position(head).reason == head.reason  # what the user reads


def test_a_cluster_whose_lease_ends_after_the_head_could_start_waits(alice, backfilling):
    running, _head = waiting_head(alice)
    long = make_cluster(alice, wants(1, disks=1), lease_hours=3)
    assert admit_queued() == []
    assert state(long) == "queued"
    when = f"{running.expires_at:%Y-%m-%d %H:%M} UTC"
    assert long.reason == (
        f"waits behind big, first in the queue, which can start by {when}: this cluster's "
        f"lease ends at {long.expires_at:%Y-%m-%d %H:%M} UTC, later, so it could hold it back"
    )
    assert queue_position.position(long).reason == long.reason
    assert long.events.filter(message=f"waiting: {long.reason}").count() == 1
    admit_queued()  # the same reason again records no second event
    assert long.events.filter(message=f"waiting: {long.reason}").count() == 1


def test_a_cluster_without_a_lease_end_never_goes_ahead_of_a_waiting_head(alice, backfilling):
    waiting_head(alice)
    endless = make_cluster(alice, wants(1, disks=1))
    assert admit_queued() == []
    assert state(endless) == "queued"
    assert "a cluster without a lease end could hold it back, so it goes after it" in (
        endless.reason
    )


def test_nothing_goes_ahead_when_the_head_waits_on_a_cluster_without_a_lease_end(
    alice, backfilling
):
    _, head = waiting_head(alice, running_lease=None)
    short = make_cluster(alice, wants(1, disks=1), lease_hours=1)
    assert backfill.shadow_of(head.id).at is None
    assert admit_queued() == []
    assert state(short) == "queued"
    assert short.reason == (
        "waits behind big, first in the queue, which cannot start before capacity frees and "
        "whose start time is unknown (it waits on capacity held by 1 cluster without a lease "
        "end): no later cluster goes ahead of it"
    )
    head.refresh_from_db()
    assert head.reason.endswith(
        "; first in the queue: its start time is unknown (it waits on capacity held by 1 "
        "cluster without a lease end), so no later cluster goes ahead of it"
    )


def test_nothing_goes_ahead_of_a_head_the_nodes_have_room_for(alice, settings):
    """The head waits for addresses, not for the nodes: no lease end helps it, so nothing
    may take what it waits for."""
    settings.SCHEDULER_QUEUE_BACKFILL = True
    make_network(size=1)
    make_node(disks={"hdd": 3})
    running = make_cluster(alice, wants(1, disks=1), lease_hours=2)
    assert isinstance(reserve(running.id), Reservation)  # holds the only address
    head = make_cluster(alice, wants(1, disks=1), name="big")
    short = make_cluster(alice, wants(1, disks=1), lease_hours=1)
    assert admit_queued() == []
    assert backfill.shadow_of(head.id).room_now
    assert state(short) == "queued"
    assert short.reason == (
        "waits behind big, first in the queue, which the nodes have room for now (it waits for "
        "addresses or a concurrent placement): no later cluster goes ahead of it"
    )
    head.refresh_from_db()
    assert head.reason.startswith("needs 1 addresses")
    assert head.reason.endswith(
        "; first in the queue: the nodes have room for it, so nothing goes ahead"
    )


def test_a_short_cluster_that_does_not_fit_now_says_what_it_lacks(alice, backfilling):
    waiting_head(alice)
    too_big = make_cluster(alice, wants(1, disks=3), lease_hours=1)  # only 2 disks are free
    assert admit_queued() == []
    assert state(too_big) == "queued"
    assert too_big.reason.startswith("needs 3 free HDD disks")


def test_the_head_goes_first_once_its_lease_holder_ends(alice, backfilling):
    running, head = waiting_head(alice)
    long = make_cluster(alice, wants(1, disks=1), lease_hours=3)
    admit_queued()
    destroy_now(running.id)
    assert admit_queued() == [head.id]
    assert state(long) == "queued"


def test_a_new_launch_does_not_jump_ahead_of_a_head_it_could_delay(alice, backfilling):
    """The launch task reserves its own cluster through reserve_or_fail: with others queued
    ahead it goes by the same rule as the queue."""
    waiting_head(alice)
    long = make_cluster(alice, wants(1, disks=1), lease_hours=3)
    outcome = reserve_or_fail(long.id)
    assert isinstance(outcome, Rejection) and outcome.cause == "turn"
    assert state(long) == "queued"
    short = make_cluster(alice, wants(1, disks=1), lease_hours=1)
    outcome = reserve_or_fail(short.id)
    assert isinstance(outcome, Reservation) and outcome.cluster_id == short.id
    assert state(short) == "placing"


def test_without_backfill_nothing_passes_the_head(alice, backfilling, settings):
    settings.SCHEDULER_QUEUE_BACKFILL = False
    waiting_head(alice)
    short = make_cluster(alice, wants(1, disks=1), lease_hours=1)
    assert admit_queued() == []
    assert queue_position.position(short).reason.startswith("waits its turn: 1 cluster ahead of it")
    outcome = reserve_or_fail(short.id)  # its launch task does not jump the queue either
    assert isinstance(outcome, Rejection) and outcome.cause == "turn"
    assert state(short) == "queued"


def test_a_launch_with_nobody_queued_ahead_reserves_at_once(alice, backfilling, settings):
    settings.SCHEDULER_QUEUE_BACKFILL = False
    make_node(disks={"hdd": 3})
    first = make_cluster(alice, wants(1, disks=1))
    assert isinstance(reserve_or_fail(first.id), Reservation)


# ---------------------------------------------------------------- a simulated timeline

node_strategy = st.tuples(st.integers(4, 8), st.integers(2, 4))  # cores, HDDs
job_strategy = st.tuples(
    st.integers(0, 3),  # arrives after this many hours
    st.integers(1, 2),  # instances
    st.integers(1, 4),  # cores each
    st.integers(0, 2),  # disks each
    st.sampled_from([None, 1, 2, 2, 3, 4, 6, 8, 12, 16]),  # lease hours (None: no end)
)


class _Rollback(Exception):
    pass


def simulate(owner, jobs: list[tuple], backfilling: bool, settings) -> dict:
    """Run the jobs on the nodes already made, in virtual hours: at each arrival or lease end
    the ended clusters are destroyed (queued ones whose lease ended are cancelled) and the
    queue is admitted. Every cluster holds what it took until its lease ends. Returns
    {job index: start hour, None if it never started} and the lease end of each; the
    database is rolled back afterwards."""
    settings.SCHEDULER_QUEUE_BACKFILL = backfilling
    base = timezone.now()
    started: dict[int, float | None] = {}
    ends: dict[int, float | None] = {}
    try:
        with transaction.atomic():
            ids: dict[int, int] = {}
            t = 0.0
            while True:
                for n, (arrives, count, cores, disks, lease) in enumerate(jobs):
                    if arrives == t:
                        cluster = make_cluster(owner, wants(count, cores=cores, disks=disks))
                        end = None if lease is None else base + timedelta(hours=arrives + lease)
                        Cluster.objects.filter(id=cluster.id).update(expires_at=end)
                        ids[cluster.id], started[n] = n, None
                        ends[n] = None if lease is None else arrives + lease
                now = base + timedelta(hours=t)
                for cluster in Cluster.objects.filter(expires_at__lte=now, state__in=LIVE_STATES):
                    if cluster.state == "queued":
                        request_destroy(cluster.id)  # its lease ended while it waited
                    else:
                        destroy_now(cluster.id)
                for cluster_id in admit_queued():
                    started[ids[cluster_id]] = t
                live = Cluster.objects.filter(state__in=LIVE_STATES, expires_at__gt=now)
                upcoming = [a for a, *_ in jobs if a > t] + [
                    (c.expires_at - base).total_seconds() / 3600
                    for c in live
                    if c.expires_at is not None  # the filter above: always
                ]
                if not upcoming:
                    break
                t = min(upcoming)
            raise _Rollback
    except _Rollback:
        pass
    return {"started": started, "ends": ends}


# 30 examples (~1 s each) in the whole check; 8 in `./platter test --fast` (issue 28).
@hypothesis_settings(
    max_examples=examples(full=30, fast=8),
    deadline=None,
    suppress_health_check=list(HealthCheck),
)
@given(
    nodes=st.lists(node_strategy, min_size=1, max_size=3),
    jobs=st.lists(job_strategy, min_size=3, max_size=8),
)
def test_backfill_never_starts_the_first_waiting_head_later_than_strict_order(
    alice, settings, nodes, jobs
):
    settings.SCHEDULER_ADMIT_ON_RELEASE = False
    Quota.objects.update_or_create(
        user=alice,
        defaults=dict.fromkeys(
            ["max_clusters", "max_instances", "max_cores", "max_memory_mb", "max_disks"], 10**6
        ),
    )
    smallest_cores = min(c for c, _ in nodes)
    smallest_disks = min(d for _, d in nodes)
    # Every job fits an empty node (the launch refuses those that never fit).
    jobs = [
        (a, n, min(c, smallest_cores), min(d, smallest_disks), lease) for a, n, c, d, lease in jobs
    ]
    jobs.sort(key=lambda job: job[0])  # created in arrival order: FIFO is this order
    with transaction.atomic():
        make_network()
        for cores, disks in nodes:
            make_node(cores=cores, memory_mb=65536, disks={"hdd": disks})
        fifo = simulate(alice, jobs, backfilling=False, settings=settings)
        easy = simulate(alice, jobs, backfilling=True, settings=settings)
        transaction.set_rollback(True)
    # The first job that had to wait: up to then both runs are the same.
    waited = [n for n, start in fifo["started"].items() if start != jobs[n][0]]
    if not waited:
        assert easy["started"] == fifo["started"]  # nothing waited: nothing to backfill
        return
    head = waited[0]
    infinity = float("inf")
    fifo_start = fifo["started"][head]
    easy_start = easy["started"][head]
    assert (infinity if easy_start is None else easy_start) <= (
        infinity if fifo_start is None else fifo_start
    ), (head, fifo, easy)
    # Whatever went ahead of it while it waited was back by the time strict order starts it.
    if fifo_start is not None:
        for n, start in easy["started"].items():
            if n > head and start is not None and start < (easy_start or infinity):
                assert easy["ends"][n] is not None and easy["ends"][n] <= fifo_start
