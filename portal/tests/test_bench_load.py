"""bench/load in a few seconds: two users with tokens load a live server backed by the real
worker and the lab, and every consistency check passes with no answer of 500 or more."""

import uuid
from datetime import UTC, datetime

import pytest
from django.core.cache.backends.locmem import LocMemCache
from rest_framework.throttling import SimpleRateThrottle

from apps.accounts.models import Quota
from apps.catalog.models import ProductVersion
from apps.catalog.services import load_catalog
from apps.clusters.models import Cluster, Instance
from apps.inventory.models import Address, Disk, Network, Node
from apps.tokens.services import issue_token
from portal.tests.bench_scripts import load_bench


@pytest.fixture
def own_throttle_cache(monkeypatch):
    """User and token ids repeat across runs sharing Redis: a budget of this test's own."""
    monkeypatch.setattr(SimpleRateThrottle, "cache", LocMemCache(f"load-{uuid.uuid4()}", {}))


@pytest.mark.django_db(transaction=True)
def test_a_short_load_by_two_users_leaves_everything_consistent(
    dispatching, lab_cleanup, live_server, own_throttle_cache, alice, bob
):
    load = load_bench("load")
    load_catalog()
    tokens = []
    for user in (alice, bob):
        Quota.objects.create(user=user, **load.USER_QUOTA)
        tokens.append(issue_token(user, "load").secret)

    outcome = load.run(live_server.url, tokens, duration=5, settle=40, seed=3)

    failed = {check.name: check.problems for check in outcome.checks if not check.passed}
    assert not failed
    samples = outcome.recorder.samples
    assert {s.kind for s in samples} >= {"launch", "detail", "destroy"}
    assert all(0 < s.status < 500 for s in samples)
    assert outcome.recorder.launched  # some launches were accepted...
    launched = Cluster.objects.filter(id__in=outcome.recorder.launched)
    assert set(launched.values_list("state", flat=True)) == {"destroyed"}  # ...and wound down
    assert set(launched.values_list("owner__username", flat=True)) <= {"alice", "bob"}


@pytest.mark.django_db
def test_the_checks_name_what_a_leak_leaves_behind(alice):
    checks = load_bench("load").load_checks
    load_catalog()
    demo = ProductVersion.objects.get(product__name="demo", version="1.0")
    node = Node.objects.create(name="n1", endpoint="unix:///nowhere", cores=2, memory_mb=1024)
    disk = Disk.objects.create(
        node=node, mount_path="/d1", capacity_bytes=1, state=Disk.State.ALLOCATED
    )
    Network.objects.create(
        name="net",
        subnet="10.9.0.0/29",
        gateway="10.9.0.1",
        first_address="10.9.0.2",
        last_address="10.9.0.3",
    )
    Address.objects.filter(ip="10.9.0.2").update(held=True)
    Quota.objects.create(user=alice, max_cores=2)
    # A destroyed cluster whose instance still holds 3 cores (more than the node has) and
    # none of the disk it asked for, while the disk stays allocated and an address held.
    cluster = Cluster.objects.create(owner=alice, version=demo, name="leak", state="destroyed")
    Instance.objects.create(
        cluster=cluster,
        role="worker",
        index=0,
        cores=3,
        memory_mb=64,
        disks=1,
        node=node,
        active=True,
    )

    assert checks.disk_states() == [
        f"disk {disk.id} is allocated but no active instance holds it",
        f"instance {cluster.instances.get().id} asked 1 hdd disks: holds 0, 0 of them",
    ]
    held = Address.objects.get(ip="10.9.0.2").id
    assert checks.address_states() == [f"address {held} is held but no active instance has it"]
    assert checks.nodes_over_capacity() == ["n1: 3 of 2 cores, 64 of 1024 MB"]
    assert checks.users_over_quota() == ["user alice: max_cores is 2, holds 3"]
    assert checks.clusters_left([alice.id]) == [
        f"cluster {cluster.id} is destroyed but still holds resources"
    ]
    assert checks.disks_held_twice() == []


def test_a_helper_counts_as_left_behind_only_once_it_ended_and_stayed():
    checks = load_bench("load").load_checks
    now = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)
    helper = {"platter.site": "s", "platter.helper": "firewall"}
    ended = {"Running": False, "FinishedAt": "2026-11-28T11:59:58.123456789Z"}
    long_ago = {"Running": False, "FinishedAt": "2026-11-28T11:50:00.5Z"}

    assert checks.helper_at_work(helper, {"Running": True}, now)
    # Its starter is reading its output and will remove it next.
    assert checks.helper_at_work(helper, ended, now)
    assert not checks.helper_at_work(helper, long_ago, now)
    # Never started ("0001-01-01"): created and abandoned.
    never = {"Running": False, "FinishedAt": "0001-01-01T00:00:00Z"}
    assert not checks.helper_at_work(helper, never, now)
    assert not checks.helper_at_work({"platter.site": "s"}, {"Running": True}, now)
