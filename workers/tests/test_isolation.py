"""Cluster networks on the real lab: each cluster on a segment of its own, reachable from the
host through the segment's shim, and unreachable from any other cluster."""

import subprocess
import urllib.request

import pytest
from django.core.management import call_command

from apps import nodes
from apps.catalog.models import ProductVersion
from apps.clusters import logs, services
from apps.clusters.data_path import data_path
from apps.clusters.models import Cluster, Instance
from apps.clusters.provisioning import launch_provisioning
from apps.clusters.tests.waiting import wait_for
from apps.inventory.models import Network
from apps.lab.segments import all_segments

pytestmark = pytest.mark.django_db(transaction=True)
S = Cluster.State


def members(cluster: Cluster) -> list[Instance]:
    return list(cluster.instances.filter(active=True).select_related("node", "address__network"))


def fetch_from(instance: Instance, address: str) -> tuple[int, str]:
    """HTTP from inside an instance's container to port 80 of an address (busybox wget)."""
    # (busybox's own -T timeout crashes this static build; timeout(1) bounds it instead)
    argv = ["timeout", "3", "wget", "-q", "-O", "-", f"http://{address}/"]
    assert instance.node is not None, "placed on a node"
    return nodes.client(instance.node).exec(instance.container_id, argv, 30)


def test_clusters_reach_their_own_members_and_nothing_of_another_cluster(
    dispatching, lab_cleanup, alice, bob
):
    call_command("load_catalog", verbosity=0)
    demo = ProductVersion.objects.get(product__name="demo")
    mine = services.launch(alice, demo, "mine", {"size": 2, "mem": 64})
    theirs = services.launch(bob, demo, "theirs", {"size": 1, "mem": 64})
    mine, theirs = wait_for(mine.id, S.RUNNING), wait_for(theirs.id, S.RUNNING)
    a, b = members(mine), members(theirs)

    # The launch's provisioning time adds up from its phases, each of which took some time.
    timed = launch_provisioning(mine)
    assert timed.done and timed.total == pytest.approx(sum(timed.phases.values()), abs=0.01)
    assert all(seconds > 0 for seconds in timed.phases.values()), timed.phases

    # Its data path names the disks the containers really hold, and the demo's web root.
    for path in data_path(mine):
        instance = next(i for i in a if i.hostname == path.hostname)
        assert {d.node for d in path.disks} == {instance.node.name}
        assert path.settings == {"web root": "/data/1/www"}

    # Each cluster holds a segment of its own.
    segment_a, segment_b = a[0].address.network, b[0].address.network
    assert segment_a.isolated and segment_b.isolated and segment_a != segment_b
    assert {i.address.network for i in a} == {segment_a}
    assert segment_a.holder_id == mine.id and segment_b.holder_id == theirs.id

    # Inside a cluster everything answers, across nodes...
    assert len({i.node_id for i in a}) > 1
    for source in a:
        for target in a:
            code, output = fetch_from(source, target.hostname)
            assert code == 0, f"{source.hostname} → {target.hostname}: {output}"
    # ...and nothing of the other cluster does, by address, either way.
    for source, target in [(a[0], b[0]), (a[1], b[0]), (b[0], a[0]), (b[0], a[2])]:
        code, output = fetch_from(source, target.address.ip)
        assert code != 0, f"{source.hostname} of one cluster reached {target.address.ip}"

    # The host reaches each cluster through its segment's shim, never the default route.
    shims = {s.bridge: s.shim for s in all_segments()}
    for instance in (a[0], b[0]):
        route = subprocess.run(
            ["ip", "route", "get", instance.address.ip], capture_output=True, text=True, check=True
        ).stdout
        assert f"dev {shims[instance.address.network.parent]} " in route, route
        with urllib.request.urlopen(f"http://{instance.address.ip}/", timeout=5) as answer:
            assert answer.status == 200

    # The demo logs its start and each request it served (read as the logs panel reads them).
    log = logs.read(logs.source(mine, a[0].hostname), tail=50)
    text = "\n".join(line for _, line in log.entries)
    assert f"{a[0].hostname}: serving /data/1/www on port 80" in text
    assert "response:200" in text

    # Destroying gives the segment back.
    services.request_destroy(mine.id, keep_data=False)
    services.request_destroy(theirs.id, keep_data=False)
    wait_for(mine.id, S.DESTROYED)
    wait_for(theirs.id, S.DESTROYED)
    assert not Network.objects.filter(holder__in=[mine, theirs]).exists()
