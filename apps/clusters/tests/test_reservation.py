from collections import Counter

import pytest
from django.db import IntegrityError, transaction

from apps.clusters.models import Cluster, DiskAllocation, Instance
from apps.clusters.reservation import Rejection, Reservation, release, reserve
from apps.inventory.models import Address, Disk, Node

from .factories import held_disks, make_cluster, make_network, make_node, wants

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def network(db):
    return make_network()


def test_it_reserves_every_instance_on_distinct_nodes(alice):
    nodes = [make_node() for _ in range(5)]
    cluster = make_cluster(alice, wants(4, disks=8))
    outcome = reserve(cluster.id)
    assert isinstance(outcome, Reservation)
    assert len({p.node_id for p in outcome.placements}) == 4
    assert {p.node_id for p in outcome.placements} <= {n.id for n in nodes}
    for p in outcome.placements:
        disks = Disk.objects.filter(id__in=p.disk_ids)
        assert len(disks) == 8
        assert {d.node_id for d in disks} == {p.node_id}
        assert {d.state for d in disks} == {"allocated"}
    assert len({p.address_id for p in outcome.placements}) == 4
    assert Address.objects.filter(held=True).count() == 4
    cluster.refresh_from_db()
    assert cluster.state == "placing"
    assert cluster.placing_at is not None
    assert set(Instance.objects.filter(cluster=cluster).values_list("active", flat=True)) == {True}


def test_it_takes_nothing_when_one_instance_does_not_fit(alice):
    for _ in range(3):
        make_node(disks={"ssd": 8})
    make_node(disks={"ssd": 5})
    cluster = make_cluster(alice, wants(4, disks=8, kind="ssd"))
    outcome = reserve(cluster.id)
    assert isinstance(outcome, Rejection)
    assert outcome.cause == "capacity"
    assert "needs 32 free SSD disks on 4 distinct nodes" in outcome.message
    assert "best node has 8 free SSD disks" in outcome.message
    assert DiskAllocation.objects.count() == 0
    assert not Instance.objects.filter(active=True).exists()
    assert not Address.objects.filter(held=True).exists()
    cluster.refresh_from_db()
    assert cluster.state == "queued"  # waits in the admission queue
    assert "needs 32 free SSD disks" in cluster.reason


def test_it_names_the_best_node_when_no_node_is_big_enough(alice):
    make_node(disks={"ssd": 5})
    make_node(disks={"ssd": 3})
    cluster = make_cluster(alice, wants(4, disks=8, kind="ssd"))
    outcome = reserve(cluster.id)
    assert "best node has 5 free SSD disks" in outcome.message


def test_it_never_places_on_draining_down_or_maintenance_nodes(alice):
    for state in ("draining", "down", "maintenance"):
        make_node(state=state)
    good = make_node()
    outcome = reserve(make_cluster(alice, wants(1)).id)
    assert [p.node_id for p in outcome.placements] == [good.id]


def test_it_never_uses_failed_or_retired_disks(alice):
    node = make_node(disks={"hdd": 4})
    first, second = Disk.objects.filter(node=node).order_by("id")[:2]
    Disk.objects.filter(id=first.id).update(state="failed")
    Disk.objects.filter(id=second.id).update(state="retired")
    assert isinstance(reserve(make_cluster(alice, wants(1, disks=3)).id), Rejection)
    outcome = reserve(make_cluster(alice, wants(1, disks=2)).id)
    taken = Disk.objects.filter(id__in=outcome.placements[0].disk_ids)
    assert {d.state for d in taken} == {"allocated"}


def test_it_puts_the_fewest_instances_per_node_when_nodes_are_few(alice):
    make_node(cores=8)
    make_node(cores=8)
    outcome = reserve(make_cluster(alice, wants(4, cores=2, disks=2)).id)
    assert sorted(Counter(p.node_id for p in outcome.placements).values()) == [2, 2]


def test_it_prefers_the_node_that_wastes_least(alice):
    make_node(cores=12, disks={"hdd": 12})
    snug = make_node(cores=2, disks={"hdd": 2}, memory_mb=4096)
    outcome = reserve(make_cluster(alice, wants(1, cores=2, memory_mb=4096, disks=2)).id)
    assert outcome.placements[0].node_id == snug.id


def test_it_respects_node_cores_and_memory(alice):
    make_node(cores=4, memory_mb=8192)
    first = reserve(make_cluster(alice, wants(1, cores=3, disks=1)).id)
    assert isinstance(first, Reservation)
    second = reserve(make_cluster(alice, wants(1, cores=2, disks=1)).id)
    assert isinstance(second, Rejection)
    assert "1 cores" in second.message


def test_it_rejects_unknown_disk_kinds_with_the_kind_named(alice):
    make_node()
    outcome = reserve(make_cluster(alice, wants(1, kind="tape")).id)
    assert outcome.cause == "capacity"
    assert "TAPE" in outcome.message


def test_it_only_reserves_queued_clusters(alice):
    make_node()
    cluster = make_cluster(alice, wants(1))
    assert isinstance(reserve(cluster.id), Reservation)
    again = reserve(cluster.id)
    assert again.cause == "state"
    assert DiskAllocation.objects.filter(active=True).count() == 2


def test_release_gives_everything_back_and_remembers_the_holder(alice):
    make_node()
    cluster = make_cluster(alice, wants(2, disks=3))
    reserve(cluster.id)
    disks = held_disks(cluster)
    assert release(cluster.id, keep_data=True) == 6
    assert not Instance.objects.filter(active=True).exists()
    assert not Address.objects.filter(held=True).exists()
    assert set(Disk.objects.filter(id__in=disks).values_list("state", flat=True)) == {"available"}
    kept = DiskAllocation.objects.filter(disk_id__in=disks, data_kept=True)
    assert {a.instance.cluster_id for a in kept} == {cluster.id}
    assert kept.count() == 6


def test_release_keeps_a_failed_disk_failed(alice):
    make_node()
    cluster = make_cluster(alice, wants(1, disks=1))
    reserve(cluster.id)
    Disk.objects.filter(id__in=held_disks(cluster)).update(state="failed")
    release(cluster.id)
    assert Disk.objects.filter(state="failed").count() == 1


def test_new_clusters_take_disks_without_kept_data_first(alice):
    make_node(disks={"hdd": 4})
    old = make_cluster(alice, wants(1, disks=2))
    reserve(old.id)
    kept = held_disks(old)
    release(old.id, keep_data=True)
    new = make_cluster(alice, wants(1, disks=2))
    reserve(new.id)
    assert not set(held_disks(new)) & set(kept)


def test_the_database_refuses_a_second_active_allocation_of_a_disk(alice):
    make_node()
    cluster = make_cluster(alice, wants(2, disks=1))
    reserve(cluster.id)
    first, second = Instance.objects.filter(cluster=cluster)
    disk_id = first.allocations.get().disk_id
    with pytest.raises(IntegrityError), transaction.atomic():
        DiskAllocation.objects.create(disk_id=disk_id, instance=second)


def test_the_database_refuses_a_second_active_holder_of_an_address(alice):
    make_node()
    cluster = make_cluster(alice, wants(2, disks=1))
    reserve(cluster.id)
    first, second = Instance.objects.filter(cluster=cluster)
    with pytest.raises(IntegrityError), transaction.atomic():
        Instance.objects.filter(id=second.id).update(address_id=first.address_id)


def test_it_fails_a_cluster_when_there_is_no_network(alice, network):
    network.delete()
    make_node()
    cluster = make_cluster(alice, wants(1))
    assert reserve(cluster.id).cause == "network"
    assert Cluster.objects.get(id=cluster.id).state == "failed"


def test_a_drained_node_keeps_its_instances_but_takes_no_new_ones(alice):
    node = make_node()
    cluster = make_cluster(alice, wants(1))
    reserve(cluster.id)
    Node.objects.filter(id=node.id).update(state="draining")
    assert Instance.objects.get(cluster=cluster).active
    assert reserve(make_cluster(alice, wants(1)).id).cause == "capacity"


def test_it_leaves_out_the_nodes_the_cluster_avoids(alice):
    failed, good = make_node(), make_node()
    cluster = make_cluster(alice, wants(1))
    Cluster.objects.filter(id=cluster.id).update(avoid_nodes=[failed.id])
    outcome = reserve(cluster.id)
    assert [p.node_id for p in outcome.placements] == [good.id]
    other = make_cluster(alice, wants(1))
    Cluster.objects.filter(id=other.id).update(avoid_nodes=[failed.id, good.id])
    assert reserve(other.id).cause == "capacity"


def test_a_group_quota_is_checked_again_when_reserving(alice, bob):
    from django.contrib.auth.models import Group

    from apps.accounts.models import Quota

    make_node()
    team = Group.objects.create(name="team")
    team.user_set.add(alice, bob)
    first = make_cluster(alice, wants(1, cores=5))
    second = make_cluster(bob, wants(1, cores=4))  # fits while the first holds nothing
    Quota.objects.create(group=team, max_cores=8)
    assert isinstance(reserve(first.id), Reservation)
    outcome = reserve(second.id)
    assert (outcome.cause, outcome.quota.scope, outcome.quota.used) == ("quota", "group team", 5)
    assert "the quota of group team is 8 cores: 5 in use, 4 more asked" in outcome.message


def test_it_prepares_its_statements_unless_a_pooler_is_configured(alice, monkeypatch):
    import psycopg
    from django.db import connection

    asked = []
    execute = psycopg.Cursor.execute

    def recording(self, query, params=None, *, prepare=None, **kwargs):
        if type(self) is psycopg.Cursor:  # the reservation's (Django's are client-side)
            asked.append(prepare)
        return execute(self, query, params, prepare=prepare, **kwargs)

    monkeypatch.setattr(psycopg.Cursor, "execute", recording)
    make_node()
    assert isinstance(reserve(make_cluster(alice, wants(1)).id), Reservation)
    assert asked and set(asked) == {True}
    asked.clear()
    monkeypatch.setitem(connection.settings_dict, "DISABLE_SERVER_SIDE_CURSORS", True)
    assert isinstance(reserve(make_cluster(alice, wants(2, disks=3)).id), Reservation)
    assert asked and set(asked) == {False}


def test_candidates_leave_out_avoided_nodes_and_stop_at_the_window():
    from apps.clusters import placement

    nodes = [make_node() for _ in range(6)]
    make_node(state="draining")
    asked = wants(1, disks=2)
    assert {f.node_id for f in placement.candidates(asked)} == {n.id for n in nodes}
    found = placement.candidates(asked, avoid=[nodes[0].id, nodes[1].id])
    assert {f.node_id for f in found} == {n.id for n in nodes[2:]}
    assert {f.disks["hdd"] for f in found} == {12}
    assert len(placement.candidates(asked, window=3)) == 3
    assert placement.candidates(wants(1, kind="tape")) == []


def _cluster_candidates(cluster_id: int) -> list:
    from django.db import connection

    from apps.clusters import placement

    sql, params, kinds = placement.cluster_candidates_statement(cluster_id)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return placement.parse(placement.named_rows(cursor), kinds)


def test_a_cluster_reads_its_own_candidates_avoiding_the_nodes_it_failed_on(alice):
    small = make_node(cores=2)  # too few cores for the cluster's smallest instance
    ssd_only = make_node(disks={"ssd": 12})
    nodes = [make_node() for _ in range(4)]
    cluster = make_cluster(alice, wants(2, cores=4, disks=3))
    assert {f.node_id for f in _cluster_candidates(cluster.id)} == {n.id for n in nodes}
    Cluster.objects.filter(id=cluster.id).update(avoid_nodes=[nodes[0].id])
    found = _cluster_candidates(cluster.id)
    assert {f.node_id for f in found} == {n.id for n in nodes[1:]}
    assert {f.disks["hdd"] for f in found} == {12}
    assert not {small.id, ssd_only.id} & {f.node_id for f in found}
    # Several kinds: any node with the cores and memory is a candidate; assign() picks.
    mixed = make_cluster(alice, [*wants(1, disks=2), *wants(1, disks=2, kind="ssd", role="x")])
    assert ssd_only.id in {f.node_id for f in _cluster_candidates(mixed.id)}


def test_a_cluster_reusing_data_has_no_candidates(alice):
    make_node()
    first = make_cluster(alice, wants(1))
    again = make_cluster(alice, wants(1))
    Cluster.objects.filter(id=again.id).update(reuse_data_of=first)
    assert _cluster_candidates(first.id) != []
    assert _cluster_candidates(again.id) == []
