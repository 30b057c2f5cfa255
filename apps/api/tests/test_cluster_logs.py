"""GET /clusters/<id>/logs: an instance's container log as text/plain. The node is a fake
here (the Docker calls are replaced by a log of 30 lines); test_lab_logs.py reads real ones."""

import asyncio

import pytest
from django.contrib.auth import get_user_model

from apps.clusters.models import Cluster
from apps.clusters.reservation import reserve
from apps.clusters.tests import fake_logs
from apps.clusters.tests.factories import make_network, make_node
from apps.metrics import store
from apps.nodes import NodeClient, NodeError, NodeMissing
from portal import streams

from .conftest import make_cluster

pytestmark = pytest.mark.django_db


@pytest.fixture
def node_log(monkeypatch) -> list[str]:
    """The containers asked for, and a log of 30 lines for each."""
    return fake_logs.install(monkeypatch)


@pytest.fixture
def placed(alice, demo) -> Cluster:
    make_network()
    make_node(cores=16, memory_mb=16384, disks={"hdd": 6})
    cluster = make_cluster(alice, demo, name="placed", size=1)
    reserve(cluster.id)
    cluster.refresh_from_db()
    assert cluster.state == Cluster.State.PLACING
    return cluster


def logs_url(cluster: Cluster) -> str:
    return f"/api/v1/clusters/{cluster.id}/logs"


def test_it_answers_the_last_lines_as_text(api, placed, node_log):
    response = api("owner").get(logs_url(placed), {"instance": "worker-0", "tail": 3})
    assert response.status_code == 200
    assert response["Content-Type"] == "text/plain; charset=utf-8"
    assert response.content.decode() == "line 27\nline 28\nline 29\n"
    assert len(node_log) == 1
    assert node_log[0].endswith(f"-c{placed.id}-worker-0")  # by name until the worker records an id


def test_it_reads_the_first_instance_by_default_and_timestamps_on_request(api, placed, node_log):
    response = api("owner").get(logs_url(placed), {"tail": 2, "timestamps": "true"})
    assert response.content.decode().splitlines() == [
        f"{at} {text}" for at, text in fake_logs.LINES[-2:]
    ]
    assert node_log[0].endswith("-master-0")


def test_since_gives_only_the_lines_after_a_timestamp(api, placed, node_log):
    cursor = fake_logs.LINES[26][0]
    response = api("owner").get(logs_url(placed), {"since": cursor, "tail": 100})
    assert response.content.decode() == "line 27\nline 28\nline 29\n"


@pytest.mark.parametrize("tail", ["0", "10001", "-3", "many"])
def test_a_bad_tail_is_a_400_naming_it(api, placed, node_log, tail):
    response = api("owner").get(logs_url(placed), {"tail": tail})
    assert response.status_code == 400
    assert set(response.json()["fields"]) == {"tail"}
    assert node_log == []


@pytest.mark.parametrize(
    ("name", "value"),
    [("since", "yesterday"), ("seconds", "0"), ("seconds", "301"), ("follow", "maybe")],
)
def test_other_bad_parameters_are_400s_naming_them(api, placed, node_log, name, value):
    response = api("owner").get(logs_url(placed), {name: value})
    assert response.status_code == 400
    assert set(response.json()["fields"]) == {name}


def test_an_unknown_instance_is_a_400_listing_the_instances(api, placed, node_log):
    response = api("owner").get(logs_url(placed), {"instance": "worker-7"})
    assert response.status_code == 400
    assert (
        "has no instance 'worker-7'; it has master-0, worker-0"
        in response.json()["fields"]["instance"]
    )


def test_a_queued_cluster_has_no_container_yet(api, alice, demo, node_log):
    cluster = make_cluster(alice, demo, name="waiting", size=1)
    response = api("owner").get(logs_url(cluster))
    assert response.status_code == 409
    body = response.json()
    assert body["error"] == "no_container"
    assert body["message"].startswith("master-0 has no container yet: the cluster is queued")
    assert node_log == []


def test_a_removed_container_says_it_no_longer_exists(api, placed, monkeypatch):
    def gone(*args, **kwargs):
        raise NodeMissing("lab-1", "no such container")

    monkeypatch.setattr(NodeClient, "logs", gone)
    placed.instances.update(container_id="0123abcd")
    Cluster.objects.filter(id=placed.id).update(state=Cluster.State.DESTROYED)
    response = api("owner").get(logs_url(placed))
    assert response.status_code == 409
    assert response.json()["message"] == (
        "The container of master-0 no longer exists: the cluster is destroyed."
    )


def test_a_node_that_does_not_answer_is_a_503_naming_it(api, placed, monkeypatch):
    def down(client, *args, **kwargs):
        raise NodeError(client.name, "did not answer (ConnectionError)", transient=True)

    monkeypatch.setattr(NodeClient, "logs", down)
    response = api("owner").get(logs_url(placed))
    assert response.status_code == 503
    assert response.json()["error"] == "node_unavailable"
    assert "did not answer" in response.json()["message"]


@pytest.mark.parametrize("persona", ["other", "anonymous"])
def test_others_cannot_read_the_logs(api, placed, node_log, persona):
    expected = 404 if persona == "other" else 401
    assert api(persona).get(logs_url(placed)).status_code == expected
    long = f"/api/v1/clusters/alice/demo/1.0/{placed.id}/logs"
    assert api(persona).get(long).status_code == expected
    assert node_log == []


def test_admins_and_the_long_path_read_them(api, placed, node_log):
    assert api("admin").get(logs_url(placed), {"tail": 1}).content == b"line 29\n"
    long = f"/api/v1/clusters/alice/demo/1.0/{placed.id}/logs"
    assert api("owner").get(long, {"tail": 1}).content == b"line 29\n"


def test_a_client_that_accepts_only_text_gets_errors_as_text(api, placed, node_log):
    response = api("owner").get(logs_url(placed), {"tail": "0"}, HTTP_ACCEPT="text/plain")
    assert response.status_code == 400
    assert response["Content-Type"].startswith("text/plain")
    assert response.content.decode().startswith("invalid request: tail\ntail: ")


def test_follow_streams_whole_lines_and_ends_with_the_stream(api, placed, monkeypatch):
    chunks = [
        "2026-11-24T17:00:01.000000000Z one\n2026-11-24T17:00:0",
        "2.000000000Z tw",
        "o\n",
        "2026-11-24T17:00:03.000000000Z three",
    ]
    asked = {}

    async def follow(client, container, tail, seconds, **options):
        asked.update(tail=tail, seconds=seconds, **options)
        for chunk in chunks:
            yield chunk

    monkeypatch.setattr(NodeClient, "follow_logs_async", follow)
    monkeypatch.setattr(NodeClient, "container_state", lambda client, container: "running")
    response = api("owner").get(logs_url(placed), {"follow": "true", "tail": 5, "seconds": 9})
    assert response.status_code == 200 and response.streaming
    assert response["Content-Type"] == "text/plain; charset=utf-8"
    parts = [part.decode() for part in streamed(response)]
    assert parts == ["one\n", "two\n", "three\n"]
    assert asked == {"tail": 5, "seconds": 9, "since": None, "timestamps": True}


def test_follow_of_a_missing_container_is_a_409_before_streaming(api, placed, monkeypatch):
    monkeypatch.setattr(NodeClient, "container_state", lambda client, container: None)
    response = api("owner").get(logs_url(placed), {"follow": "true"})
    assert response.status_code == 409
    assert "no container yet" in response.json()["message"]  # placing, no id recorded yet


def streamed(response) -> list[bytes]:
    """The parts of a streamed answer, read on an event loop as the ASGI server reads them."""

    async def read():
        return [part async for part in response.streaming_content]

    return asyncio.run(read())


@pytest.fixture
def endless_log(monkeypatch):
    """A container that keeps writing, and a clean count of open streams."""

    async def follow(client, container, tail, seconds, **options):
        while True:
            yield "2026-11-24T17:00:01.000000000Z tick\n"
            await asyncio.sleep(0.01)

    monkeypatch.setattr(NodeClient, "follow_logs_async", follow)
    monkeypatch.setattr(NodeClient, "container_state", lambda client, container: "running")
    users = get_user_model().objects.all()
    store.client().delete(*(streams.KEY.format(user_id=user.id) for user in users))


def test_follows_over_the_per_user_limit_are_429_naming_it_and_others_are_served(
    api, placed, endless_log, settings, alice, admin_user
):
    settings.STREAMS_PER_USER = 2
    follow = {"follow": "true", "seconds": 60}
    held = [api("owner").get(logs_url(placed), follow) for _ in range(2)]
    assert [r.status_code for r in held] == [200, 200]
    refused = api("owner").get(logs_url(placed), follow)
    assert refused.status_code == 429
    assert refused.json()["error"] == "too_many_streams" and refused.json()["limit"] == 2
    assert "at most 2 per user" in refused.json()["message"]
    # Someone else's follow (staff reading alice's cluster) is served meanwhile.
    other = api("admin").get(logs_url(placed), follow)
    assert other.status_code == 200 and streams.open_streams(admin_user.id) == 1
    # A stream that ends (here: the client reads a little and leaves) frees its slot.
    asyncio.run(read_a_little_and_leave(held[0]))
    assert streams.open_streams(alice.id) == 1
    assert api("owner").get(logs_url(placed), follow).status_code == 200


def test_a_follow_ends_at_the_streams_deadline(api, placed, endless_log, settings, alice):
    settings.STREAM_FOLLOW_SECONDS = 0.3  # asked for 60 s: the site's deadline wins
    response = api("owner").get(logs_url(placed), {"follow": "true", "seconds": 60})
    lines = b"".join(streamed(response)).decode().splitlines()
    assert lines and set(lines) == {"tick"}
    assert streams.open_streams(alice.id) == 0


async def read_a_little_and_leave(response) -> None:
    body = response.streaming_content
    await anext(body)
    await body.aclose()
