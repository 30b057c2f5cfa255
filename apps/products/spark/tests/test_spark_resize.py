"""Spark's resize on fake nodes: a worker leaves once no executor runs on it (spark-admin's
answer stands in for the master's). For real: test_spark_lab.py."""

import json

import pytest

from apps.clusters import services
from apps.clusters.models import Cluster
from workers import operations
from workers.tests.fake_launch import running, workers_of

pytestmark = pytest.mark.django_db(transaction=True)
S = Cluster.State


@pytest.mark.parametrize(("cores_used", "removed"), [(0, True), (2, False)])
def test_spark_workers_leave_once_their_executors_ended(
    fake_nodes, pool, alice, catalog, settings, cores_used, removed
):
    settings.RESIZE_DRAIN_SECONDS = 0
    cluster = running(alice, "spark", size=2, mem=1024)
    leaving = workers_of(cluster)[1]
    status = [{"host": w.hostname, "state": "ALIVE", "cores_used": 0} for w in workers_of(cluster)]
    status[1]["cores_used"] = cores_used
    fake_nodes.exec_results["spark-admin"] = (0, json.dumps(status))
    services.request_resize(cluster.id, 1)
    assert operations.run("resize", cluster.id) == S.RUNNING
    assert (len(workers_of(cluster)) == 1) is removed
    if not removed:
        failed = cluster.events.get(message__startswith="resize failed")
        assert f"executors still run on {leaving.hostname}" in failed.message
