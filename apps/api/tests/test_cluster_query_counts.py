"""The cluster list and detail cost a fixed number of queries, however many clusters a user
has and however many instances, disks and events a cluster has (issue 34: the API at the
framework's rate)."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from apps.clusters.models import Cluster
from apps.clusters.reservation import Reservation, reserve
from apps.clusters.tests.factories import make_network, make_node

from .conftest import make_cluster, token_for

# The token with its user, then the list's count and page; or the cluster (with its owner,
# version, revision and credentials), its instances, their disks and its events.
LIST_QUERIES = 1
DETAIL_QUERIES = 4


@pytest.fixture
def pool(db):
    make_network()
    for _ in range(3):
        make_node(cores=16, memory_mb=65536, disks={"hdd": 12})


def running(owner, demo, size: int) -> Cluster:
    cluster = make_cluster(owner, demo, size=size, disks=2)
    assert isinstance(reserve(cluster.id), Reservation)
    Cluster.objects.filter(id=cluster.id).update(state="running")
    return cluster


def queries(client: APIClient, path: str) -> list[str]:
    client.get(path)  # the token's last use is written once a minute: not on every call
    with CaptureQueriesContext(connection) as captured:
        assert client.get(path).status_code == 200
    return [q["sql"] for q in captured.captured_queries]


@pytest.fixture
def client(alice) -> APIClient:
    c = APIClient()
    c.credentials(HTTP_AUTHORIZATION=f"Bearer {token_for(alice)}")
    return c


def test_it_lists_one_or_many_clusters_in_the_same_queries(client, alice, demo, pool):
    running(alice, demo, 1)
    one = queries(client, "/api/v1/clusters")
    for size in (1, 2, 3, 1):
        running(alice, demo, size)
    many = queries(client, "/api/v1/clusters")
    assert len(many) == len(one) == LIST_QUERIES


def test_it_details_a_small_or_a_large_cluster_in_the_same_queries(client, alice, demo, pool):
    small, large = running(alice, demo, 1), running(alice, demo, 4)
    few = queries(client, f"/api/v1/clusters/{small.id}")
    more = queries(client, f"/api/v1/clusters/{large.id}")
    assert len(more) == len(few) == DETAIL_QUERIES
