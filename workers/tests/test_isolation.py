"""Cluster networks on the real lab: each cluster on a segment of its own, routed from the host
through the segment's shim, unreachable from any other cluster, and behind its perimeter: the
host (standing for the site network) reaches its ports only when the owner allows it, the
portal's proxy always."""

import asyncio
import socket
import subprocess
import urllib.request

import pytest
from django.core.management import call_command

from apps import nodes
from apps.catalog.models import ProductVersion
from apps.clusters import logs, services
from apps.clusters import perimeter as perimeter_rules
from apps.clusters.data_path import data_path
from apps.clusters.models import Cluster, Instance
from apps.clusters.provisioning import launch_provisioning
from apps.clusters.tests.waiting import open_to_the_host, wait_for
from apps.inventory.models import Network
from apps.lab import host
from apps.lab.segments import all_segments
from apps.proxy import transport
from workers import perimeter, reconciler

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


def refused_from_the_host(address: str, port: int) -> bool:
    """Whether a connection from the host's own address is refused (the perimeter's reset)."""
    try:
        with socket.create_connection((address, port), timeout=5):
            return False
    except ConnectionRefusedError:
        return True


def proxied_status(instance: Instance) -> int:
    """The instance's port 80 fetched as the portal's proxy fetches a web UI: its transport,
    from the address the perimeter lets in (the segment's portal address)."""
    assert instance.address is not None
    source = instance.address.network.portal_source
    assert source, "lab segments have a portal address"
    exchange = transport.Exchange("GET", f"http://{instance.address.ip}/", {}, b"", "t", source)

    async def fetch() -> int:
        try:
            return (await exchange.open()).status_code
        finally:
            await exchange.close()

    return asyncio.run(fetch())


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

    # The host routes to each cluster through its segment's shim, never the default route...
    shims = {s.bridge: s.shim for s in all_segments()}
    for instance in (a[0], b[0]):
        route = subprocess.run(
            ["ip", "route", "get", instance.address.ip], capture_output=True, text=True, check=True
        ).stdout
        assert f"dev {shims[instance.address.network.parent]} " in route, route
    # ...but the perimeter lets the host (another person on the site network) reach no
    # product port of a cluster whose owner did not allow it, on any node of the cluster,
    # while the portal's proxy (its own address on the segment) still gets the page.
    for instance in (*a, *b):
        assert refused_from_the_host(instance.address.ip, 80), instance.hostname
        assert proxied_status(instance) == 200, instance.hostname
    # The owner allows the host: mine answers it, theirs still does not.
    assert open_to_the_host(mine.id) == []
    for instance in a:
        with urllib.request.urlopen(f"http://{instance.address.ip}/", timeout=5) as answer:
            assert answer.status == 200
    assert refused_from_the_host(b[0].address.ip, 80)

    # A node that lost its rules (a reboot; here its table deleted by hand) gets them back at
    # the reconciler's next pass, before anything of it is started again.
    node = b[0].node
    table = perimeter_rules.table_name(node.name)
    host.delete_nft_table(table)
    assert not refused_from_the_host(b[0].address.ip, 80), "no rules: the port answers"
    perimeter.forget([node])  # the pass that follows a node's return
    assert node.name in reconciler.reconcile()["perimeter"]
    assert refused_from_the_host(b[0].address.ip, 80)
    assert "tcp dport 22 accept" in host.run("nft", "list", "table", "inet", table).stdout

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
