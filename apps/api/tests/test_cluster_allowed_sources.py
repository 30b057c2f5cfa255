"""Who may connect to a cluster's ports, through the API: the allow-list given at launch, PUT
/clusters/<id>/allowed-sources, and the detail's allowed_sources and site_sources."""

import pytest

from apps.clusters.models import Cluster, ClusterEvent

from .conftest import make_cluster

pytestmark = pytest.mark.django_db


@pytest.fixture
def running(alice, demo) -> Cluster:
    return make_cluster(alice, demo, "running")


def put(client, cluster: Cluster, sources):
    return client.put(
        f"/api/v1/clusters/{cluster.id}/allowed-sources",
        {"allowed_sources": sources},
        format="json",
    )


def events_of(cluster: Cluster) -> list[str]:
    return list(ClusterEvent.objects.filter(cluster=cluster).values_list("message", flat=True))


def test_a_launch_stores_its_sources_normalised(api, alice, demo):
    launched = api("owner").post(
        "/api/v1/products/demo/1.0",
        {"size": 1, "allowed_sources": ["192.0.2.7", "10.8.1.9/16", "10.8.0.0/16"]},
        format="json",
    )
    assert launched.status_code == 202, launched.content
    assert launched.json()["allowed_sources"] == ["10.8.0.0/16", "192.0.2.7/32"]
    stored = Cluster.objects.get(id=launched.json()["id"])
    assert stored.allowed_sources == ["10.8.0.0/16", "192.0.2.7/32"]


def test_a_launch_without_sources_lets_nobody_else_in(api, alice, demo):
    launched = api("owner").post("/api/v1/products/demo/1.0", {"size": 1}, format="json")
    assert launched.status_code == 202, launched.content
    assert Cluster.objects.get(id=launched.json()["id"]).allowed_sources == []


@pytest.mark.parametrize(
    "sources, named",
    [
        (["10.0.0.0/8", "10.1.2.300"], "'10.1.2.300' is not an IPv4 address or CIDR"),
        (["2001:db8::/32"], "'2001:db8::/32' is IPv6"),
        ([7], "7 is not an address or CIDR"),
        (42, "must be a list of IPv4 addresses or CIDRs; got 42"),
        ({"10.0.0.0/8": 1}, "must be a list of IPv4 addresses or CIDRs"),
    ],
)
def test_a_launch_with_a_bad_source_is_refused_naming_it(api, alice, demo, sources, named):
    refused = api("owner").post(
        "/api/v1/products/demo/1.0", {"size": 1, "allowed_sources": sources}, format="json"
    )
    assert refused.status_code == 400, refused.content
    assert named in refused.json()["fields"]["allowed_sources"]
    assert not Cluster.objects.exists()


def test_the_owner_replaces_the_list_and_the_event_says_so(api, running, settings):
    settings.PERIMETER_SITE_SOURCES = ["172.20.0.0/16"]
    answer = put(api("owner"), running, ["198.51.100.0/24", " 10.1.2.3 "])
    assert answer.status_code == 200, answer.content
    assert answer.json() == {
        "allowed_sources": ["10.1.2.3/32", "198.51.100.0/24"],
        "site_sources": ["172.20.0.0/16"],
    }
    assert Cluster.objects.get(id=running.id).allowed_sources == ["10.1.2.3/32", "198.51.100.0/24"]
    assert "allowed sources set to 10.1.2.3/32, 198.51.100.0/24 by alice" in events_of(running)
    shown = api("owner").get(f"/api/v1/clusters/{running.id}").json()
    assert shown["allowed_sources"] == ["10.1.2.3/32", "198.51.100.0/24"]
    assert shown["site_sources"] == ["172.20.0.0/16"]

    closed = put(api("owner"), running, [])
    assert closed.status_code == 200 and closed.json()["allowed_sources"] == []
    assert Cluster.objects.get(id=running.id).allowed_sources == []


def test_a_bad_entry_is_named_and_changes_nothing(api, running):
    put(api("owner"), running, ["10.0.0.0/8"])
    refused = put(api("owner"), running, ["192.0.2.0/24", "everyone"])
    assert refused.status_code == 400, refused.content
    body = refused.json()
    assert body["fields"]["allowed_sources"] == (
        "'everyone' is not an IPv4 address or CIDR (e.g. 10.1.2.0/24)"
    )
    assert Cluster.objects.get(id=running.id).allowed_sources == ["10.0.0.0/8"]
    missing = api("owner").put(f"/api/v1/clusters/{running.id}/allowed-sources", {}, format="json")
    assert missing.status_code == 400 and "allowed_sources" in missing.json()["fields"]


@pytest.mark.parametrize(
    "persona, code",
    [("other", 404), ("read_only", 403), ("anonymous", 401), ("revoked", 401)],
)
def test_nobody_but_the_owner_and_staff_changes_it(api, running, persona, code):
    answer = put(api(persona), running, ["0.0.0.0/0"])
    assert answer.status_code == code, answer.content
    assert Cluster.objects.get(id=running.id).allowed_sources == []
    assert not any("allowed sources" in message for message in events_of(running))


def test_staff_may_change_it_and_are_named(api, running):
    answer = put(api("admin"), running, ["203.0.113.0/24"])
    assert answer.status_code == 200, answer.content
    assert Cluster.objects.get(id=running.id).allowed_sources == ["203.0.113.0/24"]
    assert "allowed sources set to 203.0.113.0/24 by admin" in events_of(running)


@pytest.mark.parametrize("state", ["destroying", "destroyed"])
def test_a_cluster_on_its_way_out_is_refused(api, alice, demo, state):
    gone = make_cluster(alice, demo, state)
    answer = put(api("owner"), gone, ["10.0.0.0/8"])
    assert answer.status_code == 409, answer.content
    assert f"the cluster is {state}" in answer.json()["message"]
    assert Cluster.objects.get(id=gone.id).allowed_sources == []


def test_the_schema_documents_the_endpoint(api):
    schema = api("owner").get("/api/v1/schema/?format=json").json()
    operation = schema["paths"]["/api/v1/clusters/{id}/allowed-sources"]["put"]
    assert {"200", "400", "404", "409"} <= set(operation["responses"])
    body = operation["requestBody"]["content"]["application/json"]["schema"]["$ref"]
    asked = schema["components"]["schemas"][body.rsplit("/", 1)[1]]
    assert asked["properties"]["allowed_sources"]["type"] == "array"
    assert asked["required"] == ["allowed_sources"]
    detail = schema["components"]["schemas"]["ClusterDetail"]["properties"]
    assert {"allowed_sources", "site_sources"} <= set(detail)
