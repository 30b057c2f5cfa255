"""Placement rules on random inventories (hypothesis), against the real database."""

from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from apps.clusters.models import Cluster, DiskAllocation, Instance
from apps.clusters.reservation import Rejection, Reservation, reserve
from apps.inventory.models import Disk, Node

from .factories import make_cluster, make_network, make_node, wants

nodes_strategy = st.lists(
    st.tuples(
        st.integers(1, 8),  # cores
        st.integers(0, 6),  # hdd disks
        st.integers(0, 3),  # ssd disks
        st.sampled_from(["active", "active", "active", "draining", "down"]),
    ),
    min_size=1,
    max_size=6,
)
cluster_strategy = st.tuples(
    st.integers(1, 5),  # instances
    st.integers(1, 4),  # cores each
    st.integers(1, 4),  # disks each
    st.sampled_from(["hdd", "ssd"]),
)


@pytest.mark.django_db
@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(inventory=nodes_strategy, shape=cluster_strategy)
def test_placements_follow_the_rules_on_any_inventory(alice, inventory, shape):
    DiskAllocation.objects.all().delete()
    Instance.objects.all().delete()
    Cluster.objects.all().delete()
    Disk.objects.all().delete()
    Node.objects.all().delete()
    make_network()
    for cores, hdd, ssd, state in inventory:
        make_node(cores=cores, memory_mb=65536, disks={"hdd": hdd, "ssd": ssd}, state=state)
    count, cores, disks, kind = shape
    # How many instances each usable node could take on its own.
    slots = {
        node.id: min(
            node.cores // cores,
            node.disks.filter(kind=kind, state="available").count() // disks,
        )
        for node in Node.objects.filter(state="active")
    }
    outcome = reserve(make_cluster(alice, wants(count, cores=cores, disks=disks, kind=kind)).id)
    if isinstance(outcome, Rejection):
        assert outcome.cause == "capacity"
        assert sum(slots.values()) < count  # it only refuses what cannot fit
        assert not DiskAllocation.objects.exists()
        return
    assert isinstance(outcome, Reservation)
    per_node = Counter(p.node_id for p in outcome.placements)
    for placement in outcome.placements:
        node = Node.objects.get(id=placement.node_id)
        assert node.state == "active"
        taken = Disk.objects.filter(id__in=placement.disk_ids)
        assert {d.node_id for d in taken} == {node.id}
        assert {d.kind for d in taken} == {kind}
        assert len(taken) == disks
    for node_id, n in per_node.items():
        assert n * cores <= Node.objects.get(id=node_id).cores
    usable = sum(1 for s in slots.values() if s >= 1)
    if usable >= count:
        assert max(per_node.values()) == 1  # distinct nodes whenever possible
    else:
        assert len(per_node) == usable  # otherwise every usable node gets some
