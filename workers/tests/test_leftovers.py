"""Addresses, disks and the segment of containers not confirmed removed stay held until the
reconciler sees them gone, then are released exactly once (issue 29, item 5). Above the node
boundary (apps.nodes.fake): a node whose API does not answer while its containers may still
run on the data network."""

import pytest

from apps.clusters import leftovers, services
from apps.clusters.models import Cluster, ClusterEvent, Leftover
from apps.clusters.tests.factories import make_network, make_node
from apps.clusters.tests.parallel import run_together
from apps.inventory.models import Address, Disk, Network
from workers import operations, reconciler

from .test_operations import demo, fake_nodes, placed  # noqa: F401 (fixtures)

pytestmark = pytest.mark.django_db(transaction=True)
S = Cluster.State


def addresses_of(cluster: Cluster) -> set[str]:
    return {i.address.ip for i in cluster.instances.select_related("address") if i.address}


@pytest.fixture
def segments():
    """Two isolated segments (one cluster each) and the shared network."""
    make_network()
    return [
        Network.objects.create(
            name=f"seg{n}",
            subnet=f"10.{20 + n}.0.0/24",
            gateway=f"10.{20 + n}.0.1",
            first_address=f"10.{20 + n}.0.2",
            last_address=f"10.{20 + n}.0.20",
            isolated=True,
        )
        for n in range(2)
    ]


def test_a_destroy_on_a_silent_node_keeps_its_addresses_from_the_next_cluster(
    fake_nodes,  # noqa: F811
    alice,
    bob,
    demo,  # noqa: F811
    settings,
):
    settings.DESTROY_RETRIES = 0
    make_network()
    node = make_node(disks={"ssd": 4})
    first = placed(alice, demo)
    operations.run("launch", first.id)
    taken = addresses_of(first)
    services.request_destroy(first.id, keep_data=True)
    fake_nodes.down(node.name)  # its API does not answer; its containers still run
    assert operations.run("destroy", first.id) == S.FAILED
    first.refresh_from_db()
    assert "could not remove" in first.reason
    assert "stay reserved, for nobody else, until Platter sees them gone" in first.reason
    assert len(fake_nodes.running(node.name)) == 2

    fake_nodes.up(node.name)  # (answers again, but no reconcile pass has looked yet)
    second = placed(bob, demo)
    assert addresses_of(second).isdisjoint(taken)
    assert Disk.objects.filter(node=node, state="allocated").count() == 4  # 2 held, 2 bob's

    report = reconciler.reconcile(grace_seconds=3600)
    assert sorted(report["leftovers_released"]) == sorted(
        f"{node.name}/{c}" for c in Leftover.objects.values_list("container", flat=True)
    )
    assert len(report["leftovers_released"]) == 2
    assert fake_nodes.running(node.name) == []  # removed first, then released
    assert not Address.objects.filter(ip__in=taken, held=True).exists()
    assert Disk.objects.filter(node=node, state="allocated").count() == 2  # bob's
    # Exactly once: a second pass finds nothing left to release.
    assert reconciler.reconcile(grace_seconds=3600)["leftovers_released"] == []
    released = first.events.filter(message__contains="released its address")
    assert released.count() == 2


def test_a_cluster_re_placed_away_from_a_silent_node_leaves_its_segment_held(
    fake_nodes,  # noqa: F811
    segments,
    alice,
    bob,
    demo,  # noqa: F811
):
    make_node(disks={"ssd": 4}), make_node(disks={"ssd": 4})
    cluster = placed(alice, demo, size=1)
    held = cluster.instances.get()
    segment = Network.objects.get(holder=cluster)
    fake_nodes.down(held.node.name)
    assert operations.run("launch", cluster.id) == S.QUEUED  # re-placed on the other node
    cluster.refresh_from_db()
    assert cluster.instances.get().node != held.node
    assert Leftover.objects.get(cluster=cluster).segment == segment
    # The old segment and address stay held: the next cluster is kept off that segment.
    bobs = placed(bob, demo, size=1)
    assert bobs.instances.get().address.network != segment
    assert Network.objects.get(id=segment.id).holder == cluster
    assert Address.objects.get(id=held.address_id).held

    fake_nodes.up(held.node.name)
    assert len(reconciler.reconcile(grace_seconds=3600)["leftovers_released"]) == 1
    assert not Address.objects.get(id=held.address_id).held
    assert Network.objects.get(id=segment.id).holder is None
    # The cluster's new placement keeps the segment it holds now.
    now_on = cluster.instances.select_related("address__network").get().address.network
    assert now_on != segment and Network.objects.get(id=now_on.id).holder == cluster


def test_a_leftover_is_released_exactly_once_however_many_passes_race(
    fake_nodes,  # noqa: F811
    alice,
    demo,  # noqa: F811
    settings,
):
    settings.DESTROY_RETRIES = 0
    make_network()
    node = make_node(disks={"ssd": 4})
    cluster = placed(alice, demo, size=1)
    operations.run("launch", cluster.id)
    services.request_destroy(cluster.id)
    fake_nodes.down(node.name)
    operations.run("destroy", cluster.id)
    leftover = Leftover.objects.get(cluster=cluster)
    outcomes = run_together([lambda: leftovers.release(leftover, "gone")] * 4)
    assert sorted(outcomes) == [False, False, False, True]
    assert cluster.events.filter(message__startswith=f"{leftover.container} gone").count() == 1
    assert not Address.objects.get(id=leftover.address_id).held
    assert ClusterEvent.objects.filter(cluster=cluster).exists()


def test_staff_see_what_stays_held_in_the_admin(
    fake_nodes,  # noqa: F811
    alice,
    demo,  # noqa: F811
    settings,
    admin_client,
):
    settings.DESTROY_RETRIES = 0
    make_network()
    node = make_node(disks={"ssd": 4})
    cluster = placed(alice, demo, size=1)
    operations.run("launch", cluster.id)
    services.request_destroy(cluster.id)
    fake_nodes.down(node.name)
    operations.run("destroy", cluster.id)
    page = admin_client.get("/admin/clusters/leftover/?released__isnull=True")
    assert page.status_code == 200
    leftover = Leftover.objects.get(cluster=cluster)
    assert leftover.container in page.content.decode()
    # A node that will never answer again (reinstalled): staff release by hand, once.
    for _ in range(2):
        admin_client.post(
            "/admin/clusters/leftover/",
            {"action": "release_gone", "_selected_action": [leftover.id]},
        )
    assert not Address.objects.get(id=leftover.address_id).held
    assert cluster.events.filter(message__contains="released by admin").count() == 1
