"""On the real lab, with a real worker: a real product's containers carry the writable-layer
and pids limits of the settings, and the launch says so (issue 21). That the lab's data-roots
really enforce the layer limit is shown on a small daemon by apps/lab/tests/test_dataroot.py
(writing past a 16 MB limit fails); here the limit is the development default, far above any
write a test may make in reasonable time."""

import pytest
from django.conf import settings

from apps.clusters.models import Cluster, ClusterEvent
from apps.nodes import engine
from workers.tests.lab_products import launch_default

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_spark_clusters_containers_are_limited_as_the_settings_say(
    dispatching, lab_cleanup, alice
):
    assert settings.CONTAINER_ROOTFS_LIMIT, "the development settings cap the writable layer"
    cluster = launch_default(alice, "spark", "limited")
    for instance in cluster.instances.select_related("node").filter(active=True):
        host = engine.cached(instance.node).api.inspect_container(instance.container_id)
        config = host["HostConfig"]
        assert config["StorageOpt"] == {"size": settings.CONTAINER_ROOTFS_LIMIT}
        assert config["PidsLimit"] == settings.CONTAINER_PIDS_LIMIT
        assert host["State"]["Running"] is True
    said = ClusterEvent.objects.filter(cluster=cluster).values_list("message", flat=True)
    assert any(
        f"at most {settings.CONTAINER_ROOTFS_LIMIT} outside its disks" in m
        and "enforced by each node's Docker" in m
        for m in said
    ), list(said)
    assert Cluster.objects.get(id=cluster.id).state == Cluster.State.RUNNING
