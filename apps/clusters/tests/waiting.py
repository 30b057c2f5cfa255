"""Waiting for a cluster driven by a real worker to reach a state."""

import time

import pytest

from apps.clusters.models import Cluster


def wait_for(cluster_id: int, *states: str, seconds: float = 90) -> Cluster:
    """The cluster once it is in one of `states`; fails naming its events after `seconds`."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        cluster = Cluster.objects.get(id=cluster_id)
        if cluster.state in states:
            return cluster
        if cluster.state == Cluster.State.FAILED:
            break  # final: waiting longer would only hide why
        time.sleep(0.1)
    events = "\n".join(str(e) for e in Cluster.objects.get(id=cluster_id).events.all())
    pytest.fail(f"cluster {cluster_id} is {cluster.state}, not {states}:\n{events}")


def open_to_the_host(cluster_id: int) -> list[str]:
    """Let the lab host connect to the cluster's ports directly, as an owner would add their
    own address: the host's addresses are on the lab's segments (each segment's shim), so the
    allow-list gets the segments' range. The rules are loaded on the cluster's nodes now.
    Returns the nodes that did not take them (none, normally)."""
    from django.conf import settings

    from apps.clusters import perimeter as rules
    from workers import perimeter

    rules.set_allowed_sources(cluster_id, [settings.LAB_SEGMENTS_SUBNET], by="the test")
    return sorted(perimeter.apply(rules.nodes_of(cluster_id)))
