"""A launch sent with an Idempotency-Key is done once: a retry with the same key and body gets
the first answer again (and no second cluster), the same key with another body is refused."""

import threading

import pytest
from django.db import connection
from rest_framework.test import APIClient

from apps.api.models import IdempotentRequest
from apps.clusters.models import Cluster
from apps.clusters.tests.factories import make_network, make_node

from .conftest import token_for

LAUNCHES = {
    "clusters": ("/api/v1/clusters", {"product": "demo", "version": "1.0", "size": 1}),
    "version": ("/api/v1/products/demo/1.0", {"size": 1}),
}


@pytest.fixture(autouse=True)
def pool(db):
    """A node the launches fit on (a launch the pool could never run is refused)."""
    make_network()
    return make_node(cores=64, memory_mb=65536, disks={"hdd": 24, "ssd": 8})


def post(api, persona: str, path: str, body: dict, key: str | None):
    headers = {"HTTP_IDEMPOTENCY_KEY": key} if key is not None else {}
    return api(persona).post(path, body, format="json", **headers)


@pytest.mark.parametrize("where", LAUNCHES)
def test_a_retry_with_the_same_key_gets_the_first_answer(api, demo, alice, where):
    path, body = LAUNCHES[where]
    first = post(api, "owner", path, body, "launch-7f3a")
    again = post(api, "owner", path, body, "launch-7f3a")
    assert first.status_code == again.status_code == 202
    assert again.json() == first.json() and again["Location"] == first["Location"]
    assert again["Idempotent-Replayed"] == "true" and "Idempotent-Replayed" not in first
    assert Cluster.objects.filter(owner=alice).count() == 1


def test_without_a_key_each_request_launches(api, demo, alice):
    path, body = LAUNCHES["clusters"]
    post(api, "owner", path, body, None)
    post(api, "owner", path, body, None)
    assert Cluster.objects.filter(owner=alice).count() == 2


def test_another_key_launches_again(api, demo, alice):
    path, body = LAUNCHES["clusters"]
    assert (
        post(api, "owner", path, body, "a").json()["id"]
        != post(api, "owner", path, body, "b").json()["id"]
    )


def test_the_same_key_with_another_body_is_a_422_naming_the_header(api, demo, alice):
    path, body = LAUNCHES["clusters"]
    post(api, "owner", path, body, "k1")
    response = post(api, "owner", path, {**body, "size": 2}, "k1")
    assert response.status_code == 422
    assert "Idempotency-Key" in response.json()["fields"]
    assert "k1" in response.json()["message"]
    other_path = post(api, "owner", LAUNCHES["version"][0], LAUNCHES["version"][1], "k1")
    assert other_path.status_code == 422
    assert Cluster.objects.filter(owner=alice).count() == 1


def test_keys_belong_to_their_user(api, demo, alice, bob):
    path, body = LAUNCHES["clusters"]
    mine = post(api, "owner", path, body, "shared-key").json()["id"]
    theirs = post(api, "other", path, body, "shared-key").json()["id"]
    assert mine != theirs
    assert Cluster.objects.get(id=theirs).owner == bob


def test_a_refused_launch_is_not_remembered(api, demo, alice):
    path, body = LAUNCHES["clusters"]
    assert post(api, "owner", path, {**body, "size": 99}, "k").status_code == 400
    assert post(api, "owner", path, {**body, "size": 99}, "k").status_code == 400
    assert not IdempotentRequest.objects.exists()
    assert post(api, "owner", path, body, "k2").status_code == 202


@pytest.mark.parametrize("key", ["", "x" * 256, "tab\there", "é"])
def test_a_malformed_key_is_a_400_naming_the_header(api, demo, key):
    path, body = LAUNCHES["clusters"]
    response = post(api, "owner", path, body, key)
    assert response.status_code == 400
    assert "Idempotency-Key" in response.json()["fields"]


def test_the_cesga_launch_takes_a_key_too(cesga, demo, alice):
    def launch(body):
        return cesga("owner").post(
            "/bigdata/api/v1/products/demo/1.0", body, format="json", HTTP_IDEMPOTENCY_KEY="c1"
        )

    first, again = launch({"size": 1}), launch({"size": 1})
    assert first.status_code == again.status_code == 202
    assert again.json() == first.json() and again["Location"] == first["Location"]
    assert Cluster.objects.filter(owner=alice).count() == 1
    assert launch({"size": 2}).status_code == 422


@pytest.mark.django_db(transaction=True)
def test_concurrent_retries_launch_once(alice, catalog):
    """Two requests with one key race for real (two connections): one launches, the other
    waits on the key's row and answers what the first committed."""
    secret = token_for(alice)
    answers, barrier = [], threading.Barrier(4)

    def launch():
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
        barrier.wait()
        try:
            answers.append(post(lambda _: client, "owner", *LAUNCHES["clusters"], "race"))
        finally:
            connection.close()

    threads = [threading.Thread(target=launch) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert [a.status_code for a in answers] == [202] * 4
    assert len({a.json()["id"] for a in answers}) == 1
    assert Cluster.objects.filter(owner=alice).count() == 1
