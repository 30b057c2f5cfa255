"""Resize (apps/clusters/resize.py, workers/resize.py) above the node boundary: the rules a
request is refused by, naming why, and the operation's growing and shrinking over fake nodes.
The products themselves: apps/products/<name>/tests/ (on fake nodes and on the lab)."""

import pytest

from apps.audit.models import AuditEvent
from apps.catalog.models import ProductVersion
from apps.catalog.options import resolve
from apps.clusters import services, states
from apps.clusters.models import Cluster, DiskAllocation, Instance
from apps.clusters.quotas import QuotaExceeded
from apps.clusters.reservation import reserve
from apps.clusters.resize import ResizeRefused
from apps.inventory.models import Address
from workers import operations
from workers.tests.fake_launch import running, version, workers_of

pytestmark = pytest.mark.django_db(transaction=True)
S = Cluster.State


def test_resize_is_one_operation_of_the_life_cycle_tables():
    op = states.OPERATIONS["resize"]
    assert op.requested_in == (S.RUNNING,) and op.through == (S.RESIZING,)
    assert op.ends_in == S.RUNNING
    assert operations.BY_STATE[S.RESIZING] == "resize"
    assert operations.OPERATIONS["resize"].works_in == (S.RESIZING,)
    assert S.DESTROYING in states.STATES[S.RESIZING].to  # a destroy may come meanwhile
    assert S.RESIZING in states.requested_in("destroy")


def test_a_demo_cluster_grows_on_fake_nodes_and_shrinks_back(fake_nodes, pool, alice, catalog):
    cluster = running(alice, "demo", size=1, mem=64)
    assert services.request_resize(cluster.id, 3, actor=alice) == S.RESIZING
    assert operations.run("resize", cluster.id) == S.RUNNING
    grown = workers_of(cluster)
    assert [w.index for w in grown] == [0, 1, 2]
    assert all(w.state == Instance.State.RUNNING and w.container_id for w in grown)
    running_containers = sum(len(fake_nodes.running(n.name)) for n in pool)
    assert running_containers == 4  # the master and three workers
    # The older members were told the new names; the configure steps ran again.
    execs = [c for c in fake_nodes.calls if c[1] == "exec"]
    assert len(execs) >= 2
    audit = AuditEvent.objects.get(action="cluster.resize")
    assert audit.detail["previous"] == 1 and audit.detail["workers"] == 3

    assert services.request_resize(cluster.id, 2, actor=alice) == S.RESIZING
    assert operations.run("resize", cluster.id) == S.RUNNING
    assert [w.index for w in workers_of(cluster)] == [0, 1]
    gone = Instance.objects.get(cluster=cluster, role="worker", index=2)
    assert gone.state == Instance.State.RELEASED and not gone.active
    assert not DiskAllocation.objects.filter(instance=gone, active=True).exists()
    assert DiskAllocation.objects.filter(instance=gone, data_kept=True).exists()
    assert not Address.objects.filter(id=gone.address_id, held=True).exists()
    assert sum(len(fake_nodes.running(n.name)) for n in pool) == 3
    cluster.refresh_from_db()
    assert cluster.resize_to is None
    assert cluster.events.filter(message__contains="resized to 2 workers").exists()


def test_a_grow_with_no_room_ends_running_as_before_with_the_reason(
    fake_nodes, pool, alice, catalog
):
    cluster = running(alice, "demo", size=1, mem=64)
    services.request_resize(cluster.id, 2, actor=alice)
    # Someone else took every free disk meanwhile.
    from apps.inventory.models import Disk

    Disk.objects.filter(state=Disk.State.AVAILABLE).update(state=Disk.State.FAILED)
    assert operations.run("resize", cluster.id) == S.RUNNING
    assert len(workers_of(cluster)) == 1
    assert not cluster.instances.filter(state=Instance.State.PENDING).exists()
    assert cluster.events.filter(message__startswith="resize failed: needs").exists()


def test_a_resize_left_mid_way_is_resumed(fake_nodes, pool, alice, catalog):
    cluster = running(alice, "demo", size=1, mem=64)
    services.request_resize(cluster.id, 2, actor=alice)
    Cluster.objects.filter(id=cluster.id).update(resizing_at="2000-01-01T00:00Z")
    assert operations.resume_stalled() == [cluster.id]


@pytest.mark.parametrize(
    ("workers", "problem"),
    [
        (0, "role worker allows 1 to 8 instances; asked 0"),
        (9, "role worker allows 1 to 8 instances; asked 9"),
        (2, "already has 2 workers"),
        ("3", "workers must be a whole number"),
    ],
)
def test_a_size_out_of_bounds_is_refused_naming_why(
    fake_nodes, pool, alice, catalog, workers, problem
):
    cluster = running(alice, "demo", size=2, mem=64)
    with pytest.raises(ResizeRefused, match=problem):
        services.request_resize(cluster.id, workers, actor=alice)
    cluster.refresh_from_db()
    assert cluster.state == S.RUNNING
    assert not AuditEvent.objects.filter(action="cluster.resize").exists()


def test_only_a_running_cluster_is_resized(fake_nodes, pool, alice, catalog):
    cluster = running(alice, "demo", size=2, mem=64)
    services.request_stop(cluster.id, actor=alice)
    with pytest.raises(services.StateConflict, match="only a running cluster can be resized"):
        services.request_resize(cluster.id, 3, actor=alice)


def test_a_grow_past_the_quota_is_refused_naming_the_limit(
    fake_nodes, pool, alice, catalog, settings
):
    cluster = running(alice, "demo", size=1, mem=64)
    settings.SCHEDULER_DEFAULT_QUOTA = {"max_instances": 3, "max_clusters": 1}
    with pytest.raises(QuotaExceeded, match="instances"):
        services.request_resize(cluster.id, 3, actor=alice)
    # One more fits, though the owner is at their cluster limit: a resize is no new cluster.
    assert services.request_resize(cluster.id, 2, actor=alice) == S.RESIZING


def test_a_version_without_a_plugin_refuses_to_resize_a_role_that_keeps_state(
    fake_nodes, pool, alice, catalog
):
    """An admin's copy of the demo version that names no plugin (as the CESGA import makes
    them) gets the generic one: its workers keep data on disks, so no shrink (nor grow) runs
    without a drain; before plugins, a product missing from the drain table shrank as is."""
    demo = version("demo")
    bare = ProductVersion.objects.create(
        product=demo.product,
        version="no-plugin",
        **{f: getattr(demo, f) for f in ("image", "disk_kind", "roles", "options_schema")},
        **{f: getattr(demo, f) for f in ("ports", "environment", "configure", "capabilities")},
    )
    assert bare.plugin == ""
    spec = resolve(bare, {"size": 2, "mem": 64})
    cluster = services.create_cluster(alice, bare, "bare", spec.instances, {"size": 2, "mem": 64})
    reserve(cluster.id)
    assert operations.run("launch", cluster.id) == S.RUNNING
    with pytest.raises(ResizeRefused, match=r"workers keep data on their disks.*cannot be resized"):
        services.request_resize(cluster.id, 1, actor=alice)
    with pytest.raises(ResizeRefused, match="generic"):
        services.request_resize(cluster.id, 3, actor=alice)
    cluster.refresh_from_db()
    assert cluster.state == S.RUNNING and len(workers_of(cluster)) == 2
    # The same shape under the demo plugin (the shipped version) shrinks.
    assert version("demo").plugin == "demo"
