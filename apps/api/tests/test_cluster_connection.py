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


# A read-only token reads a cluster as its owner does, but never its credentials.


def assert_no_secrets(response, made) -> None:
    text = response.content.decode()
    assert made.password not in text and made.secret not in text


def test_a_read_only_token_reads_no_credentials(api, spark):
    cluster, made = spark

    for path in (
        f"/api/v1/clusters/{cluster.id}",
        f"/api/v1/clusters/alice/spark/4.3.0/{cluster.id}",
    ):
        response = api("read_only").get(path)

        assert response.status_code == 200
        assert_no_secrets(response, made)
        connection = response.json()["connection"]
        assert connection["credentials"] is None and connection["credentials_hidden"] is True
        assert "read-only token" in connection["credentials_note"]
        # The connection strings still come, with placeholders for the secrets.
        strings = [s["value"] for s in connection["strings"]]
        assert any("<secret>" in s for s in strings if s.startswith("spark-submit"))


def test_a_read_only_token_lists_clusters_without_credentials(api, spark):
    _cluster, made = spark
    response = api("read_only").get("/api/v1/clusters")
    assert response.status_code == 200 and response.json()["results"]
    assert_no_secrets(response, made)


def test_a_read_write_token_and_the_session_still_read_them(api, client, alice, spark):
    cluster, made = spark
    assert (
        api("owner").get(f"/api/v1/clusters/{cluster.id}").json()["connection"]["credentials_note"]
        == ""
    )
    client.force_login(alice)
    body = client.get(f"/api/v1/clusters/{cluster.id}").json()
    assert body["connection"]["credentials"]["secret"] == made.secret


def test_a_read_only_token_reads_no_credentials_on_the_cesga_surface(cesga, spark):
    cluster, made = spark

    for path in (
        f"/bigdata/api/v1/clusters/alice/spark/4.3.0/{cluster.id}",
        f"/bigdata/api/v1/instances/alice/spark/4.3.0/{cluster.id}",
        f"/bigdata/api/v1/clusters/alice/spark/4.3.0/{cluster.id}/nodes",
        f"/bigdata/api/v1/clusters/alice/spark/4.3.0/{cluster.id}/services",
        "/bigdata/api/v1/clusters",
        "/bigdata/api/v1/instances",
    ):
        response = cesga("read_only").get(path)

        assert response.status_code == 200, path
        assert_no_secrets(response, made)
    data = cesga("read_only").get(f"/bigdata/api/v1/clusters/alice/spark/4.3.0/{cluster.id}")
    connection = data.json()["data"]["connection"]
    assert connection["credentials"] is None
    assert "read-only token" in connection["credentials_note"]
