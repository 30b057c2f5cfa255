"""Clusters: list, detail (short and long path), destroy, stop, start, extend."""

from datetime import timedelta

import pytest
from django.utils import timezone

from apps.clusters.models import Cluster
from apps.clusters.reservation import Reservation, reserve
from apps.clusters.tests.factories import make_network, make_node

from .conftest import PERSONAS, make_cluster

# Alice owns the cluster; bob must not learn it exists (404), admins act on anyone's.
READ = {
    "anonymous": 401,
    "owner": 200,
    "other": 404,
    "read_only": 200,
    "expired": 401,
    "revoked": 401,
    "admin": 200,
}
ACT = {
    "anonymous": 401,
    "owner": 202,
    "other": 404,
    "read_only": 403,
    "expired": 401,
    "revoked": 401,
    "admin": 202,
}


def paths(cluster: Cluster) -> list[str]:
    return [f"/api/v1/clusters/{cluster.id}", f"/api/v1/clusters/alice/demo/1.0/{cluster.id}"]


@pytest.fixture
def running(alice, demo) -> Cluster:
    cluster = make_cluster(alice, demo, state="running", size=1)
    Cluster.objects.filter(id=cluster.id).update(expires_at=timezone.now() + timedelta(hours=8))
    return cluster


@pytest.mark.parametrize("persona", PERSONAS)
@pytest.mark.parametrize("long_path", [False, True])
def test_it_shows_a_cluster_only_to_its_owner_and_admins(api, running, persona, long_path):
    assert api(persona).get(paths(running)[long_path]).status_code == READ[persona]


@pytest.mark.parametrize("persona", PERSONAS)
@pytest.mark.parametrize("long_path", [False, True])
def test_it_lets_owner_and_admins_destroy(api, running, persona, long_path):
    assert api(persona).delete(paths(running)[long_path]).status_code == ACT[persona]


@pytest.mark.parametrize("persona", PERSONAS)
@pytest.mark.parametrize("long_path", [False, True])
def test_it_lets_owner_and_admins_stop(api, running, persona, long_path):
    path = paths(running)[long_path] + "/stop"
    assert api(persona).post(path).status_code == ACT[persona]


@pytest.mark.parametrize("persona", PERSONAS)
def test_it_lets_owner_and_admins_start(api, alice, demo, persona):
    stopped = make_cluster(alice, demo, state="stopped", size=1)
    response = api(persona).post(f"/api/v1/clusters/{stopped.id}/start")
    assert response.status_code == ACT[persona]


@pytest.mark.parametrize("persona", PERSONAS)
def test_it_lets_owner_and_admins_extend(api, running, persona):
    response = api(persona).post(
        f"/api/v1/clusters/{running.id}/extend", {"hours": 2}, format="json"
    )
    assert response.status_code == {**ACT, "owner": 200, "admin": 200}[persona]


@pytest.mark.parametrize("persona", PERSONAS)
def test_it_lists_only_the_callers_clusters(api, alice, bob, demo, persona):
    make_cluster(alice, demo, name="a1", size=1)
    make_cluster(bob, demo, name="b1", size=1)
    response = api(persona).get("/api/v1/clusters")
    assert response.status_code == {**READ, "other": 200}[persona]
    if response.status_code == 200:
        names = {c["name"] for c in response.json()["results"]}
        expected = {"admin": {"a1", "b1"}, "other": {"b1"}}.get(persona, {"a1"})
        assert names == expected


def test_it_answers_409_when_the_state_does_not_allow_it(api, alice, demo):
    queued = make_cluster(alice, demo, size=1)
    response = api("owner").post(f"/api/v1/clusters/{queued.id}/stop")
    assert response.status_code == 409
    body = response.json()
    assert body["error"] == "conflict" and "queued" in body["message"]
    assert api("owner").post(f"/api/v1/clusters/{queued.id}/start").status_code == 409

    destroyed = make_cluster(alice, demo, state="destroyed", size=1)
    response = api("owner").post(
        f"/api/v1/clusters/{destroyed.id}/extend", {"hours": 1}, format="json"
    )
    assert response.status_code == 409


def test_destroying_a_queued_cluster_cancels_it(api, alice, demo):
    queued = make_cluster(alice, demo, size=1)
    response = api("owner").delete(f"/api/v1/clusters/{queued.id}")
    assert response.status_code == 202 and response.json()["state"] == "destroyed"


def test_destroy_keeps_data_unless_asked(api, running):
    response = api("owner").delete(f"/api/v1/clusters/{running.id}?keep_data=false")
    assert response.status_code == 202 and response.json()["state"] == "destroying"
    assert any("wiped" in e["message"] for e in response.json()["events"])
    bad = api("owner").delete(f"/api/v1/clusters/{running.id}?keep_data=maybe")
    assert bad.status_code == 400 and "keep_data" in bad.json()["fields"]


def test_stop_and_extend_answer_the_new_state(api, running):
    response = api("owner").post(f"/api/v1/clusters/{running.id}/stop")
    assert response.json()["state"] == "stopping"
    response = api("owner").post(
        f"/api/v1/clusters/{running.id}/extend", {"hours": 3}, format="json"
    )
    assert response.status_code == 200 and response.json()["expires_at"]
    bad = api("owner").post(f"/api/v1/clusters/{running.id}/extend", {"hours": 0}, format="json")
    assert bad.status_code == 400 and "hours" in bad.json()["fields"]


def test_the_long_path_must_name_the_cluster_exactly(api, running):
    assert api("owner").get(f"/api/v1/clusters/bob/demo/1.0/{running.id}").status_code == 404
    assert api("owner").get(f"/api/v1/clusters/alice/demo/2.0/{running.id}").status_code == 404


def test_admins_filter_by_user_state_and_product(api, alice, bob, demo):
    make_cluster(alice, demo, name="a1", size=1)
    make_cluster(alice, demo, name="a2", state="running", size=1)
    make_cluster(bob, demo, name="b1", state="running", size=1)

    def names(query: str) -> set[str]:
        response = api("admin").get(f"/api/v1/clusters?{query}")
        assert response.status_code == 200
        return {c["name"] for c in response.json()["results"]}

    assert names("user=alice") == {"a1", "a2"}
    assert names("state=running") == {"a2", "b1"}
    assert names("user=bob&state=queued") == set()
    assert names("product=demo") == {"a1", "a2", "b1"}
    assert names("product=hadoop") == set()
    assert api("admin").get("/api/v1/clusters?state=sleepy").status_code == 400


def test_lists_are_paginated(api, alice, demo):
    for n in range(3):
        make_cluster(alice, demo, name=f"c{n}", size=1)
    body = api("owner").get("/api/v1/clusters?page_size=2").json()
    assert body["count"] == 3 and len(body["results"]) == 2 and body["next"]
    body = api("owner").get(body["next"]).json()
    assert len(body["results"]) == 1 and body["previous"]
    assert api("owner").get("/api/v1/clusters?page=9").status_code == 404


def test_the_detail_shows_instances_disks_endpoints_and_events(api, alice, demo):
    make_network()
    for _ in range(2):
        make_node(cores=4, memory_mb=4096, disks={"hdd": 3})
    cluster = make_cluster(alice, demo, size=1, disks=2)
    assert isinstance(reserve(cluster.id), Reservation)

    body = api("owner").get(f"/api/v1/clusters/{cluster.id}").json()
    assert body["state"] == "placing"
    master, worker = body["instances"]
    assert (master["hostname"], master["role"], worker["hostname"]) == (
        "master-0",
        "master",
        "worker-0",
    )
    assert master["node"] and master["address"] and master["container_state"]
    assert len(master["disks"]) == 2
    assert {d["node"] for d in master["disks"]} == {master["node"]}
    assert [d["destination"] for d in master["disks"]] == ["/data/1", "/data/2"]
    assert not any("host_path" in d for d in master["disks"]), "a node's paths are for staff"
    assert body["endpoints"] == [
        {
            "role": "master",
            "hostname": "master-0",
            "name": "Web page",
            "address": master["address"],
            "port": 80,
            "protocol": "tcp",
            "url": f"http://{master['address']}:80",
        }
    ]
    assert body["timestamps"]["placing"] and body["timestamps"]["running"] is None
    assert body["events"][0]["message"] == "queued"


def test_lists_take_an_ordering_and_ignore_unknown_fields(api, alice, demo):
    for name in ("b-second", "a-first", "c-third"):
        make_cluster(alice, demo, name=name, size=1)

    def names(query: str) -> list[str]:
        answer = api("owner").get(f"/api/v1/clusters{query}").json()
        return [c["name"] for c in answer["results"]]

    assert names("?ordering=name") == ["a-first", "b-second", "c-third"]
    assert names("?ordering=-name") == ["c-third", "b-second", "a-first"]
    assert api("owner").get("/api/v1/clusters?ordering=owner__password").status_code == 200
    nodes = api("admin").get("/api/v1/nodes?ordering=-name").json()["results"]
    assert [n["name"] for n in nodes] == sorted((n["name"] for n in nodes), reverse=True)
