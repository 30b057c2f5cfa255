"""`platter notebook add` against the live test server; the test plays the worker (the grow
runs over fake nodes in the test's process)."""

import pytest

from apps.clusters.models import Cluster
from apps.clusters.tests.factories import make_network, make_node
from apps.nodes.fake import FakeNodes
from workers import operations
from workers.tests.fake_launch import running

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def spark_cluster(alice, catalog_loaded):
    make_network()
    for _ in range(3):
        make_node(disks={"hdd": 4, "ssd": 4})
    with FakeNodes():
        yield running(alice, "spark", size=1, mem=1024)


def test_notebook_add_asks_and_refusals_name_why(logged_in, spark_cluster):
    asked = logged_in("notebook", "add", spark_cluster.name)
    assert asked.returncode == 0, asked
    assert asked.stdout == f"Cluster {spark_cluster.id} ({spark_cluster.name}) is resizing.\n"
    assert operations.run("resize", spark_cluster.id) == "running"
    assert Cluster.objects.get(id=spark_cluster.id).options["notebook"] is True
    again = logged_in("notebook", "add", spark_cluster.name)
    assert again.returncode == 1
    assert "has a notebook already" in again.stderr
