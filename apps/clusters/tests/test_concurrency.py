"""Reservations that really run at the same time, each thread on its own DB connection."""

import random
from collections import defaultdict

import pytest
from django.contrib.auth import get_user_model
from django.db.models import Count, Sum

from apps.accounts.models import Quota
from apps.clusters.models import Cluster, DiskAllocation, Instance
from apps.clusters.quotas import QuotaExceeded, user_usage
from apps.clusters.reservation import Rejection, Reservation, release, reserve
from apps.inventory.models import Address, Disk, Node

from .factories import make_cluster, make_network, make_node, wants
from .parallel import run_together

pytestmark = pytest.mark.django_db(transaction=True)

THREADS = 40


STRICT = {
    "max_clusters": 50,
    "max_instances": 6,
    "max_cores": 12,
    "max_disks": 9,
    "max_disks_ssd": 3,
}


def users_with_quotas(count):
    """Users whose quotas let them queue every cluster below; `tighten` then lowers them, as an
    admin may while clusters wait, so the reservations themselves have limits to enforce."""
    users = []
    for n in range(count):
        user = get_user_model().objects.create_user(f"user{n}", f"u{n}@example.org", "pw-12345")
        Quota.objects.create(user=user, **dict.fromkeys(STRICT, 1000))
        users.append(user)
    return users


def tighten():
    Quota.objects.update(**STRICT)


def assert_invariants(clusters):
    # No disk or address is held twice.
    per_disk = DiskAllocation.objects.filter(active=True).values("disk").annotate(n=Count("id"))
    assert all(row["n"] == 1 for row in per_disk)
    active = Instance.objects.filter(active=True)
    addresses = list(active.values_list("address_id", flat=True))
    assert None not in addresses
    assert len(addresses) == len(set(addresses))
    assert Address.objects.filter(held=True).count() == len(addresses)
    assert Disk.objects.filter(state="allocated").count() == per_disk.count()
    # No node over capacity; disks sit on the node of their instance.
    for node in Node.objects.all():
        used = active.filter(node=node).aggregate(c=Sum("cores"), m=Sum("memory_mb"))
        assert (used["c"] or 0) <= node.cores
        assert (used["m"] or 0) <= node.memory_mb
    assert (
        not DiskAllocation.objects.filter(active=True)
        .exclude(disk__node_id=models_node_of_instance())
        .exists()
    )
    # No quota exceeded.
    for quota in Quota.objects.all():
        used = user_usage(quota.user_id)
        for name, limit in quota.limits().items():
            assert limit is None or used[name] <= limit, (quota.user, name, used[name], limit)
    # All or nothing, per cluster.
    for cluster in Cluster.objects.filter(id__in=[c.id for c in clusters]):
        instances = list(cluster.instances.all())
        held = [i for i in instances if i.active]
        assert len(held) in (0, len(instances)), cluster
        for instance in held:
            assert instance.allocations.filter(active=True).count() == instance.disks
        assert (cluster.state == "placing") == bool(held)


def models_node_of_instance():
    from django.db.models import OuterRef, Subquery

    return Subquery(Instance.objects.filter(id=OuterRef("instance_id")).values("node_id")[:1])


def test_parallel_reservations_never_double_book_or_exceed_limits(settings):
    settings.SCHEDULER_ADMIT_ON_RELEASE = False
    make_network(size=60)
    for _ in range(4):
        make_node(cores=8, memory_mb=32768, disks={"hdd": 5, "ssd": 2})
    users = users_with_quotas(4)
    rng = random.Random(7)  # noqa: S311  (reproducible shapes)
    clusters = []
    for n in range(THREADS):
        size = rng.randint(1, 3)
        kind = "ssd" if n % 5 == 0 else "hdd"
        disks = 1 if kind == "ssd" else rng.randint(1, 3)
        shape = wants(size, cores=rng.randint(1, 3), memory_mb=2048, disks=disks, kind=kind)
        clusters.append(make_cluster(users[n % len(users)], shape))
    tighten()
    results = run_together([lambda c=c: reserve(c.id) for c in clusters])
    errors = [r for r in results if isinstance(r, Exception)]
    assert errors == []
    assert all(isinstance(r, Reservation | Rejection) for r in results)
    causes = defaultdict(int)
    for r in results:
        causes["reserved" if isinstance(r, Reservation) else r.cause] += 1
    assert causes["reserved"] > 0
    assert causes["quota"] + causes["capacity"] + causes["contention"] > 0  # it was contested
    assert_invariants(clusters)


def test_parallel_reserves_and_releases_keep_every_invariant(settings):
    settings.SCHEDULER_ADMIT_ON_RELEASE = True
    make_network(size=60)
    for _ in range(3):
        make_node(cores=6, memory_mb=16384, disks={"hdd": 6})
    users = users_with_quotas(4)
    first = [make_cluster(users[n % 4], wants(1, cores=2, disks=2)) for n in range(8)]
    placed = [c for c in first if isinstance(reserve(c.id), Reservation)]
    assert placed
    late = [make_cluster(users[n % 4], wants(2, cores=1, disks=1)) for n in range(32)]
    tighten()
    jobs = [lambda c=c: release(c.id) for c in placed] + [lambda c=c: reserve(c.id) for c in late]
    results = run_together(jobs)
    assert [r for r in results if isinstance(r, Exception)] == []
    for cluster in placed:
        Cluster.objects.filter(id=cluster.id).update(state="destroyed")
    assert_invariants(late)


def test_parallel_launches_never_queue_more_than_the_quota(alice):
    Quota.objects.create(user=alice, max_instances=6)
    results = run_together([lambda: make_cluster(alice, wants(2)) for _ in range(16)])
    accepted = [r for r in results if isinstance(r, Cluster)]
    refused = [r for r in results if isinstance(r, QuotaExceeded)]
    assert (len(accepted), len(refused)) == (3, 13)  # 3 x 2 instances fill a limit of 6
    assert user_usage(alice.id, committed=True)["max_instances"] == 6
