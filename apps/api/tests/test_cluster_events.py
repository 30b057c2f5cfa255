"""GET /clusters/<id>/events?since=<cursor>: the events after a cursor, and the next cursor."""

import pytest

from apps.clusters.transitions import record_event

from .conftest import make_cluster

pytestmark = pytest.mark.django_db


@pytest.fixture
def cluster(alice, demo):
    cluster = make_cluster(alice, demo, name="busy", size=1)  # its first event: "queued"
    for n in range(1, 5):
        record_event(cluster.id, f"step {n}")
    return cluster


def url(cluster) -> str:
    return f"/api/v1/clusters/{cluster.id}/events"


def test_a_client_walks_the_events_with_the_cursor(api, cluster):
    owner = api("owner")
    seen, cursor, pages = [], None, 0
    while True:
        query = {"limit": 2, **({"since": cursor} if cursor else {})}
        body = owner.get(url(cluster), query).json()
        if not body["events"]:
            assert body["next"] == cursor  # nothing new: the same cursor again
            break
        assert len(body["events"]) <= 2
        seen += [e["message"] for e in body["events"]]
        cursor, pages = body["next"], pages + 1
    assert seen == ["queued", "step 1", "step 2", "step 3", "step 4"]
    assert pages == 3

    record_event(cluster.id, "later", level="warning")
    body = owner.get(url(cluster), {"since": cursor}).json()
    assert [(e["level"], e["message"]) for e in body["events"]] == [("warning", "later")]
    assert body["next"] == str(body["events"][0]["id"])
    assert set(body["events"][0]) == {"id", "at", "level", "message"}


def test_without_a_cursor_it_starts_at_the_first_event(api, cluster):
    body = api("owner").get(url(cluster)).json()
    assert [e["message"] for e in body["events"]][:2] == ["queued", "step 1"]
    assert body["next"] == str(body["events"][-1]["id"])


@pytest.mark.parametrize("since", ["abc", "-1", "1.5", "9" * 19])
def test_a_bad_cursor_is_a_400_naming_it(api, cluster, since):
    response = api("owner").get(url(cluster), {"since": since})
    assert response.status_code == 400
    assert set(response.json()["fields"]) == {"since"}


@pytest.mark.parametrize("limit", ["0", "1001", "x"])
def test_a_bad_limit_is_a_400_naming_it(api, cluster, limit):
    response = api("owner").get(url(cluster), {"limit": limit})
    assert response.status_code == 400
    assert set(response.json()["fields"]) == {"limit"}


def test_others_get_404_and_admins_and_the_long_path_see_them(api, cluster):
    assert api("other").get(url(cluster)).status_code == 404
    long = f"/api/v1/clusters/alice/demo/1.0/{cluster.id}/events"
    assert api("other").get(long).status_code == 404
    assert len(api("admin").get(url(cluster)).json()["events"]) == 5
    assert len(api("owner").get(long).json()["events"]) == 5
