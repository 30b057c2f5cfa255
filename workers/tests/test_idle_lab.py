"""Idle stop on the real lab: the probes read a real container's connections, a cluster with a
client connected from outside keeps running, and once the client is gone it stops (data
kept) through the real stop operation."""

import socket
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.utils import timezone

from apps.catalog.models import ProductVersion
from apps.clusters import idle as rules
from apps.clusters import services
from apps.clusters.models import Cluster, DiskAllocation
from apps.clusters.tests.waiting import open_to_the_host, wait_for
from workers import idle

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.lab]
S = Cluster.State


def aged(cluster_id: int, minutes: float) -> None:
    """As if it started running `minutes` ago and nothing was seen using it since."""
    Cluster.objects.filter(id=cluster_id).update(
        running_at=timezone.now() - timedelta(minutes=minutes), active_at=None, active_signal=""
    )


def test_a_connected_client_keeps_it_running_and_without_one_it_stops(
    dispatching, lab_cleanup, alice
):
    call_command("load_catalog", verbosity=0)
    demo = ProductVersion.objects.get(product__name="demo")
    cluster = wait_for(services.launch(alice, demo, "idle", {"size": 1, "mem": 64}).id, S.RUNNING)
    rules.set_limit(cluster.id, 5)
    master = cluster.instances.get(role="master")
    held = DiskAllocation.objects.filter(instance__cluster=cluster, active=True).count()

    # A client on the host (through the segment's shim; the owner lets it in) holds a
    # connection to the web port.
    assert open_to_the_host(cluster.id) == []
    with socket.create_connection((master.address.ip, 80), timeout=5):
        aged(cluster.id, 30)
        assert idle.check_idle_clusters()["stopped"] == []
        used = Cluster.objects.get(id=cluster.id)
        assert used.state == S.RUNNING
        assert f"connected to {master.hostname}:80" in used.active_signal

    aged(cluster.id, 30)
    assert idle.check_idle_clusters()["stopped"] == [cluster.id]
    stopped = wait_for(cluster.id, S.STOPPED)
    why = stopped.events.filter(state=S.STOPPING).last()
    assert why is not None and why.message.startswith(
        "stopping: idle stop: nothing used it for 30 min"
    )
    # Stopped, never destroyed: it keeps its disks.
    assert DiskAllocation.objects.filter(instance__cluster=cluster, active=True).count() == held
