"""The cluster detail's connection details, in the REST API and the CESGA API."""

import pytest

from apps.clusters import credentials
from apps.clusters.tests.test_connection import launched

pytestmark = pytest.mark.django_db


@pytest.fixture
def spark(catalog, alice):
    cluster = launched(alice, "spark", "4.3.0")
    return cluster, credentials.ensure_credentials(cluster)


def test_the_owner_gets_connection_strings_and_credentials(api, spark):
    cluster, made = spark
    master = cluster.instances.get(role="master").address.ip

    body = api("owner").get(f"/api/v1/clusters/{cluster.id}").json()

    connection = body["connection"]
    strings = [s["value"] for s in connection["strings"]]
    assert f"spark://{master}:7077" in strings
    assert any(made.secret in s for s in strings if s.startswith("spark-submit"))
    assert connection["credentials"] == {
        "username": "alice",
        "password": made.password,
        "secret": made.secret,
    }
    assert connection["credentials_hidden"] is False
    # The old field stays, now from the same selector.
    assert {e["port"] for e in body["endpoints"]} >= {7077, 8080}
    assert body["endpoints"] == connection["endpoints"]


def test_staff_see_the_credentials_too(api, spark):
    cluster, made = spark
    body = api("admin").get(f"/api/v1/clusters/{cluster.id}").json()
    assert body["connection"]["credentials"]["password"] == made.password


def test_another_user_gets_404_and_never_the_secret(api, spark):
    cluster, made = spark
    response = api("other").get(f"/api/v1/clusters/{cluster.id}")
    assert response.status_code == 404
    assert made.secret not in response.content.decode()


def test_the_cesga_detail_carries_the_same_connection(cesga, spark):
    cluster, made = spark
    path = f"/bigdata/api/v1/clusters/alice/spark/4.3.0/{cluster.id}"

    data = cesga("owner").get(path).json()["data"]

    assert data["connection"]["credentials"]["secret"] == made.secret
    assert any(s["value"].startswith("spark://") for s in data["connection"]["strings"])
    services = cesga("owner").get(f"{path}/services").json()["services"]
    declared = {
        role: [p["port"] for p in cluster.version.ports if p["role"] == role]
        for role in ("master", "worker")
    }
    assert {s["name"]: s["ports"] for s in services} == declared
