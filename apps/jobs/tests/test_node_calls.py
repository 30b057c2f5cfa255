"""Node calls inside web requests (issue 41, item 4) over fake nodes: each holds one of its
user's NODE_CALLS_PER_USER slots (portal.streams.node_call), so a user with that many slow
ones in flight gets 429 naming the limit while another user still gets through, and none
holds a database connection while the node answers. Requests run in threads of their own on
their own connections, as a server's would (hence committed rows: transaction=True)."""

import threading
from concurrent.futures import Future, ThreadPoolExecutor
from urllib.parse import quote

import pytest
from asgiref.sync import async_to_sync
from django.db import connection

from apps.clusters.models import Cluster
from apps.jobs import services
from apps.jobs.models import Job
from apps.jobs.services import JobRequest
from apps.jobs.tests.conftest import make_cluster
from apps.metrics import store
from apps.nodes.fake import FakeContainer, FakeNodeClient, FakeNodes
from portal import streams

pytestmark = pytest.mark.django_db(transaction=True)
LIMIT = 2
SLOW = "slow"  # the name of the threads whose node calls wait for the test's word


class SlowNodes(FakeNodes):
    """Fake nodes whose listings (an exec) wait in threads named SLOW until `go` is set, and
    that note whether the calling thread held a database connection meanwhile."""

    def __init__(self) -> None:
        super().__init__()
        self.go = threading.Event()
        self.waiting = threading.Semaphore(0)
        self.connected: list[bool] = []  # one per call: a connection was open during it
        self.exec_results["sh"] = self.listing

    def note(self) -> None:
        self.connected.append(connection.connection is not None)
        if threading.current_thread().name.startswith(SLOW):
            self.waiting.release()
            assert self.go.wait(30)

    def listing(self, argv: list[str]) -> tuple[int, str]:
        self.note()
        return 0, "8\tcounts.txt\n"


@pytest.fixture
def nodes(settings):
    settings.NODE_CALLS_PER_USER = LIMIT
    with SlowNodes() as fake:
        fake.on("lab-1")["c-master"] = FakeContainer("c-master", "c-master", {}, state="running")
        yield fake
        fake.go.set()


@pytest.fixture(autouse=True)
def no_slots_left_over(alice, bob):
    keys = [streams.NODE_CALLS_KEY.format(user_id=u.id) for u in (alice, bob)]
    store.client().delete(*keys)
    yield
    store.client().delete(*keys)


def job_of(user, cluster: Cluster) -> Job:
    asked = JobRequest(kind="pyspark", main="/opt/app.py", output_path="out")
    job = services.submit(user, cluster, asked)
    Job.objects.filter(id=job.id).update(state=Job.State.SUCCEEDED)
    return job


def outputs(client, job: Job):
    return client.get(f"/api/v1/jobs/{job.id}/outputs")


def in_flight(nodes: SlowNodes, calls: list) -> list[Future]:
    """`calls` started in SLOW threads, returned once each is waiting on its node."""
    pool = ThreadPoolExecutor(len(calls), thread_name_prefix=SLOW)
    futures = [pool.submit(call) for call in calls]
    pool.shutdown(wait=False)
    for _ in calls:
        assert nodes.waiting.acquire(timeout=30), "a node call never reached the node"
    return futures


def test_it_refuses_a_users_call_over_the_limit_while_another_user_gets_through(
    api, nodes, alice, bob
):
    mine, his = job_of(alice, make_cluster(alice)), job_of(bob, make_cluster(bob))
    slow = in_flight(nodes, [lambda: outputs(api("owner"), mine)] * LIMIT)

    refused = outputs(api("owner"), mine)
    assert refused.status_code == 429
    assert refused.json()["error"] == "too_many_node_calls"
    assert refused.json()["limit"] == LIMIT
    assert f"at most {LIMIT} per user" in refused.json()["message"]
    assert streams.open_streams(alice.id) == 0  # counted apart from her streams

    theirs = outputs(api("other"), his)
    assert theirs.status_code == 200
    assert theirs.json()["files"] == [{"name": "counts.txt", "size": 8}]

    nodes.go.set()
    assert [f.result().status_code for f in slow] == [200] * LIMIT
    assert outputs(api("owner"), mine).status_code == 200  # her slots came back


def test_no_call_holds_a_database_connection_while_the_node_answers(api, nodes, alice):
    job = job_of(alice, make_cluster(alice))
    assert outputs(api("owner"), job).status_code == 200
    assert nodes.connected == [False]


def test_the_job_page_says_why_it_lists_no_outputs_when_refused(client, nodes, alice):
    job = job_of(alice, make_cluster(alice))
    client.force_login(alice)
    slow = in_flight(nodes, [lambda: outputs_page(client, job)] * LIMIT)
    refused = outputs_page(client, job)
    assert refused.status_code == 429
    assert f"at most {LIMIT} per user" in refused.content.decode()
    nodes.go.set()
    assert [f.result().status_code for f in slow] == [200] * LIMIT


def outputs_page(client, job: Job):
    return client.get(f"/jobs/{job.id}/")


def read(response) -> bytes:
    async def parts() -> bytes:
        return b"".join([part async for part in response.streaming_content])

    return async_to_sync(parts)()


def test_a_download_holds_its_slot_until_its_body_ends(api, nodes, alice, bob):
    job = job_of(alice, make_cluster(alice))
    nodes.files[("lab-1", f"/tmp/platter-jobs/{job.id}/out/counts.txt")] = b"spark 3\n"
    url = f"/api/v1/jobs/{job.id}/outputs/{quote('counts.txt')}"
    unread = [api("owner").get(url) for _ in range(LIMIT)]  # slow readers: bodies not read
    assert [a.status_code for a in unread] == [200] * LIMIT
    assert streams.open_streams(alice.id, streams.NODE_CALLS) == LIMIT

    refused = api("owner").get(url)
    assert refused.status_code == 429
    assert refused.json()["error"] == "too_many_node_calls"
    on_web = api("owner")
    on_web.force_login(alice)
    assert on_web.get(f"/jobs/{job.id}/outputs/counts.txt").status_code == 429

    assert [read(a) for a in unread] == [b"spark 3\n"] * LIMIT
    assert streams.open_streams(alice.id, streams.NODE_CALLS) == 0
    assert read(api("owner").get(url)) == b"spark 3\n"


def test_a_container_log_is_read_without_a_database_connection(
    api, nodes, alice, monkeypatch, settings
):
    cluster = make_cluster(alice)
    nodes.on("lab-1")["c-master"].log = "started\n"
    seen = FakeNodeClient.logs

    def logs(self, container: str, tail: int, **options) -> str:
        nodes.note()
        return seen(self, container, tail, **options)

    monkeypatch.setattr(FakeNodeClient, "logs", logs)
    answer = api("owner").get(f"/api/v1/clusters/{cluster.id}/logs")
    assert answer.status_code == 200, answer.content
    assert answer.content == b"started\n"
    assert nodes.connected == [False]

    slow = in_flight(nodes, [lambda: api("owner").get(f"/api/v1/clusters/{cluster.id}/logs")])
    settings.NODE_CALLS_PER_USER = 1
    refused = api("owner").get(f"/api/v1/clusters/{cluster.id}/logs")
    assert refused.status_code == 429
    nodes.go.set()
    assert slow[0].result().status_code == 200
