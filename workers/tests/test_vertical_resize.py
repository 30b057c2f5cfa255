"""Vertical resize (apps/clusters/vertical.py, workers/resize.py) above the node boundary: the
request's refusals in words (bounds, node room naming the node, quota), node capacity held
under parallel requests, and the operation over fake nodes: cores live without a restart,
memory by a rolling restart, a failure put back, usage split at the change."""

from datetime import timedelta

import pytest
from django.utils import timezone

from apps.accounts.models import Quota
from apps.audit.models import AuditEvent
from apps.clusters import services
from apps.clusters.models import Cluster, ClusterEvent, DiskAllocation, Instance, ResourceChange
from apps.clusters.quotas import QuotaExceeded
from apps.clusters.resize import ResizeRefused
from apps.clusters.tests.factories import make_network, make_node
from apps.clusters.tests.parallel import run_together
from apps.products.base import ResizeFailed
from apps.products.registry import plugin_for
from apps.usage.services import usage_rows
from workers import operations
from workers.tests.fake_launch import running, workers_of

pytestmark = pytest.mark.django_db(transaction=True)
S = Cluster.State


def containers_of(fake_nodes, cluster):
    """Each worker's container on its fake node, by hostname."""
    found = {}
    for worker in workers_of(cluster):
        name = next(n for n in fake_nodes.names(worker.node.name) if f"-{worker.hostname}" in n)
        found[worker.hostname] = fake_nodes.on(worker.node.name)[name]
    return found


def test_refusals_name_the_problem(fake_nodes, pool, alice, catalog):
    cluster = running(alice, "demo", size=2, mem=64)
    cases = [
        ({"role": "nope", "cores": 2}, "has no running nope; its roles are master, worker"),
        ({"role": "worker"}, "give new cores, new memory_mb, or both"),
        ({"role": "worker", "cores": 3}, "may have 1 to 2 cores; asked 3"),
        ({"role": "worker", "memory_mb": 4096}, "to 512 MB of memory; asked 4096"),
        ({"role": "worker", "cores": "2"}, "cores must be a whole number"),
        ({"role": "worker", "cores": 1, "memory_mb": 64}, "already have 1 cores and 64 MB"),
    ]
    for asked, words in cases:
        with pytest.raises(ResizeRefused, match=words):
            services.request_vertical_resize(cluster.id, **asked, actor=alice)
    cluster.refresh_from_db()
    assert cluster.state == S.RUNNING and cluster.reshape is None
    services.request_stop(cluster.id, actor=alice)
    with pytest.raises(services.StateConflict, match="only a running cluster"):
        services.request_vertical_resize(cluster.id, "worker", cores=2, actor=alice)


def test_a_grow_past_the_quota_is_refused_and_holds_nothing(fake_nodes, pool, alice, catalog):
    cluster = running(alice, "demo", size=2, mem=128)  # 3 instances of 1 core
    Quota.objects.create(user=alice, max_cores=4)
    with pytest.raises(QuotaExceeded, match="4 cores: 3 in use, 2 more asked"):
        services.request_vertical_resize(cluster.id, "worker", cores=2, actor=alice)
    assert [w.cores for w in workers_of(cluster)] == [1, 1]
    assert not ResourceChange.objects.exists()
    # Giving back is never refused by a quota.
    Quota.objects.filter(user=alice).update(max_cores=1)
    assert services.request_vertical_resize(cluster.id, "worker", memory_mb=64, actor=alice) == (
        S.RESIZING
    )


def test_an_instance_that_cannot_grow_where_it_is_is_refused_naming_its_node(
    fake_nodes, alice, catalog
):
    make_network()
    small = make_node(cores=3, memory_mb=4096, disks={"hdd": 4})
    cluster = running(alice, "demo", size=2, mem=64)  # 3 cores of 3 on the one node
    with pytest.raises(ResizeRefused) as refused:
        services.request_vertical_resize(cluster.id, "worker", cores=2, actor=alice)
    words = str(refused.value)
    assert f"node {small.name} has 0 free cores" in words
    assert "would need 2 more cores" in words and "cannot move to another node" in words
    # Memory it has room for.
    services.request_vertical_resize(cluster.id, "worker", memory_mb=512, actor=alice)


def test_parallel_grows_never_take_more_of_a_node_than_it_has(fake_nodes, alice, bob, catalog):
    """Two clusters on one node with room for one of their grows: exactly one is accepted,
    under the nodes' row locks."""
    make_network()
    node = make_node(cores=5, memory_mb=4096, disks={"hdd": 8})
    first = running(alice, "demo", size=1, mem=64)
    second = running(bob, "demo", size=1, mem=64)  # 4 cores of 5 taken
    outcomes = run_together(
        [
            lambda c=c, u=u: services.request_vertical_resize(c.id, "worker", cores=2, actor=u)
            for c, u in ((first, alice), (second, bob))
        ],
        connected=True,
    )
    refused = [o for o in outcomes if isinstance(o, ResizeRefused)]
    assert len(refused) == 1 and f"node {node.name} has 0 free cores" in str(refused[0])
    assert [o for o in outcomes if o is not refused[0]] == [S.RESIZING]
    held = sum(Instance.objects.filter(node=node, active=True).values_list("cores", flat=True))
    assert held == 5


def test_cores_change_live_without_a_restart(fake_nodes, pool, alice, catalog):
    cluster = running(alice, "demo", size=2, mem=64)
    before = containers_of(fake_nodes, cluster)
    assert services.request_vertical_resize(cluster.id, "worker", cores=2, actor=alice) == (
        S.RESIZING
    )
    cluster.refresh_from_db()
    assert cluster.reshape["rolling"] is False
    assert operations.run("resize", cluster.id) == S.RUNNING
    after = containers_of(fake_nodes, cluster)
    assert {h: c.id for h, c in after.items()} == {h: c.id for h, c in before.items()}
    assert all(c.limits == {"cores": 2, "memory_mb": None} for c in after.values())
    assert [w.cores for w in workers_of(cluster)] == [2, 2]
    cluster.refresh_from_db()
    assert cluster.reshape is None
    assert cluster.events.filter(message="running: workers now have 2 cores and 64 MB").exists()
    audit = AuditEvent.objects.get(action="cluster.resize")
    assert audit.detail["cores"] == 2 and audit.detail["previous_cores"] == 1


def test_memory_restarts_the_instances_one_at_a_time(fake_nodes, pool, alice, catalog, monkeypatch):
    cluster = running(alice, "demo", size=2, mem=64)
    before = containers_of(fake_nodes, cluster)
    back: list[tuple[str, int]] = []

    def restarted(self, op, member):
        # Each instance is back before the next one goes: the other is untouched yet.
        now = containers_of(fake_nodes, Cluster.objects.get(id=cluster.id))
        changed = [h for h, c in now.items() if c.id != before[h].id]
        back.append((member.hostname, len(changed)))

    monkeypatch.setattr(type(plugin_for(cluster.definition)), "restarted", restarted)
    services.request_vertical_resize(cluster.id, "worker", memory_mb=256, actor=alice)
    cluster.refresh_from_db()
    assert cluster.reshape["rolling"] is True
    assert operations.run("resize", cluster.id) == S.RUNNING
    assert back == [(w.hostname, n) for n, w in enumerate(workers_of(cluster), start=1)]
    after = containers_of(fake_nodes, cluster)
    assert all(c.spec.memory_mb == 256 and c.state == "running" for c in after.values())
    assert all(after[h].id != before[h].id for h in before)
    # Their disks go with them: the same binds.
    assert all(after[h].spec.binds == before[h].spec.binds for h in before)


def test_a_restart_that_does_not_come_back_is_put_back(
    fake_nodes, pool, alice, catalog, monkeypatch
):
    cluster = running(alice, "demo", size=2, mem=64)
    calls = []

    def restarted(self, op, member):
        calls.append(member.hostname)
        if len(calls) == 2:  # the second worker does not come back
            raise ResizeFailed(f"{member.hostname} did not come back")

    monkeypatch.setattr(type(plugin_for(cluster.definition)), "restarted", restarted)
    services.request_vertical_resize(cluster.id, "worker", memory_mb=256, actor=alice)
    assert operations.run("resize", cluster.id) == S.RUNNING
    workers = workers_of(cluster)
    assert [w.memory_mb for w in workers] == [64, 64]
    after = containers_of(fake_nodes, cluster)
    assert all(c.spec.memory_mb == 64 and c.state == "running" for c in after.values())
    # Put back: the two changed ones restarted again (the second, then the first).
    assert calls == [workers[0].hostname, workers[1].hostname, *[w.hostname for w in workers]]
    failed = cluster.events.get(level=ClusterEvent.Level.ERROR)
    assert failed.message == f"resize failed: {workers[1].hostname} did not come back"
    assert cluster.events.filter(
        message__startswith="running: resize failed, workers unchanged"
    ).exists()
    cluster.refresh_from_db()
    assert cluster.reshape is None
    # Usage saw the change and its undoing: two changes per worker, ending where it began.
    changes = ResourceChange.objects.filter(instance__in=workers).order_by("at", "id")
    assert [(c.memory_mb_before, c.memory_mb) for c in changes] == [(64, 256)] * 2 + [(256, 64)] * 2


def test_usage_counts_each_stretch_at_the_figures_it_held(fake_nodes, pool, alice, catalog):
    cluster = running(alice, "demo", size=1, mem=64)
    services.request_vertical_resize(cluster.id, "worker", cores=2, actor=alice)
    operations.run("resize", cluster.id)
    worker = workers_of(cluster)[0]
    # Move the history back: the worker joined 3 h ago and changed 1 h ago.
    now = timezone.now()
    DiskAllocation.objects.filter(instance__cluster=cluster).update(
        created=now - timedelta(hours=3)
    )
    ResourceChange.objects.filter(instance=worker).update(at=now - timedelta(hours=1))
    Cluster.objects.filter(id=cluster.id).update(created=now - timedelta(hours=4))
    ClusterEvent.objects.filter(cluster=cluster).exclude(state="").update(
        at=now - timedelta(hours=3, minutes=30)
    )
    rows = usage_rows(
        Cluster.objects.filter(id=cluster.id), (now - timedelta(days=1)).date(), now.date(), now
    )
    core_h = sum(r.core_h for r in rows if r.cluster_id == cluster.id)
    # The master (1 core for 3 h) and the worker (1 core for 2 h, then 2 cores for 1 h).
    assert core_h == pytest.approx(3 + 2 + 2, abs=0.05)
