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
