"""The API's idle stop: the limit, keep running, and the idle block of a cluster's detail."""

import pytest

from apps.clusters.models import Cluster

from .conftest import make_cluster

pytestmark = pytest.mark.django_db


@pytest.fixture
def running(alice, demo) -> Cluster:
    return make_cluster(alice, demo, "running")


def test_the_owner_sets_a_limit_and_the_detail_shows_it(api, running):
    url = f"/api/v1/clusters/{running.id}"
    answer = api("owner").post(f"{url}/idle", {"minutes": 90}, format="json")
    assert answer.status_code == 200, answer.content
    assert answer.json()["effective_limit_minutes"] == 90
    shown = api("owner").get(url).json()["idle"]
    assert (shown["limit_minutes"], shown["from_group"]) == (90, False)
    assert (
        api("owner")
        .post(f"{url}/idle", {"minutes": None}, format="json")
        .json()["effective_limit_minutes"]
        is None
    )


def test_keep_running_names_the_owner_as_the_last_use(api, running):
    answer = api("owner").post(f"/api/v1/clusters/{running.id}/keep-running")
    assert answer.status_code == 200
    assert answer.json()["last_signal"] == "kept running by its owner"


@pytest.mark.parametrize(
    "persona, body, code",
    [
        ("owner", {"minutes": 0}, 400),
        ("owner", {"minutes": "soon"}, 400),
        ("other", {"minutes": 5}, 404),
        ("read_only", {"minutes": 5}, 403),
    ],
)
def test_bad_limits_others_and_read_only_tokens_are_refused(api, running, persona, body, code):
    answer = api(persona).post(f"/api/v1/clusters/{running.id}/idle", body, format="json")
    assert answer.status_code == code, answer.content
    assert Cluster.objects.get(id=running.id).idle_limit_minutes is None


def test_a_launch_takes_an_idle_limit_and_names_a_bad_one(api, alice, demo):
    launched = api("owner").post(
        "/api/v1/products/demo/1.0", {"size": 1, "idle_minutes": 45}, format="json"
    )
    assert launched.status_code == 202, launched.content
    assert Cluster.objects.get(id=launched.json()["id"]).idle_limit_minutes == 45
    refused = api("owner").post(
        "/api/v1/products/demo/1.0", {"size": 1, "idle_minutes": 0}, format="json"
    )
    assert refused.status_code == 400
    assert "must be between 1 and 43200 minutes, got 0" in refused.content.decode()
