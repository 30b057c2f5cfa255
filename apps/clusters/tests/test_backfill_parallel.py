"""Admission passes and launches that really run at the same time with backfill on, each
thread on its own database connection: no disk is held twice, and nothing that could delay
the waiting head goes ahead of it."""

import pytest
from django.db.models import Count

from apps.accounts.models import Quota
from apps.clusters.admission import admit_queued, reserve_or_fail
from apps.clusters.models import Cluster, DiskAllocation
from apps.clusters.reservation import Reservation, reserve
from apps.inventory.models import Disk

from .factories import make_cluster, make_network, make_node, wants
from .parallel import run_together

pytestmark = pytest.mark.django_db(transaction=True)


def test_parallel_admissions_hold_no_disk_twice_and_never_pass_the_head(alice, settings):
    settings.SCHEDULER_QUEUE_BACKFILL = True
    settings.SCHEDULER_ADMIT_ON_RELEASE = False
    Quota.objects.create(
        user=alice,
        **dict.fromkeys(["max_clusters", "max_instances", "max_cores", "max_disks"], 1000),
        max_memory_mb=10**7,
    )
    make_network()
    make_node(cores=32, memory_mb=10**6, disks={"hdd": 6})
    running = make_cluster(alice, wants(1, disks=3), lease_hours=2)
    assert isinstance(reserve(running.id), Reservation)
    head = make_cluster(alice, wants(1, disks=6), name="head")  # waits for `running`
    short = [make_cluster(alice, wants(1, disks=1), lease_hours=1) for _ in range(8)]
    long = [make_cluster(alice, wants(1, disks=1), lease_hours=5) for _ in range(4)]

    jobs = [admit_queued] * 6 + [lambda c=c: reserve_or_fail(c.id) for c in short + long]
    results = run_together(jobs)
    assert not [r for r in results if isinstance(r, Exception)], results

    per_disk = DiskAllocation.objects.filter(active=True).values("disk").annotate(n=Count("id"))
    assert per_disk.count() == Disk.objects.filter(state="allocated").count() == 6
    assert all(row["n"] == 1 for row in per_disk)  # no disk held twice
    placed = set(Cluster.objects.filter(state="placing").values_list("id", flat=True))
    assert placed - {running.id} <= {c.id for c in short}  # only leases ending in time
    assert len(placed) == 4  # running + the 3 short ones the 3 free disks take
    assert Cluster.objects.get(id=head.id).state == "queued"
    for cluster in long:
        cluster.refresh_from_db()
        assert cluster.state == "queued" and "could hold it back" in cluster.reason
