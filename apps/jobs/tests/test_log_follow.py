"""Following a job's log through the API as a cluster's log is followed: on the event loop
(no thread waits for new output), one of the user's stream slots while it lasts (429 over the
limit), ended by the site's deadline; the client goes on from `since`."""

import asyncio
import time

import pytest
from asgiref.sync import async_to_sync, sync_to_async

from apps.jobs import services
from apps.jobs.models import Job, JobFile
from apps.jobs.services import JobRequest, Upload
from apps.metrics import store
from portal import streams

pytestmark = pytest.mark.django_db


def streamed(response) -> list[bytes]:
    """The parts of a streamed answer, read on an event loop as the ASGI server reads them.
    Through async_to_sync, the stream's queries run in this thread: in the test's transaction."""

    async def read():
        return [part async for part in response.streaming_content]

    return async_to_sync(read)()


@pytest.fixture
def running(alice, spark) -> Job:
    main = Upload(JobFile.Role.MAIN, "app.py", b"print(1)\n")
    job = services.submit(alice, spark, JobRequest(kind="pyspark", uploads=[main]))
    services.start(job.id)
    services.append_log(job.id, "one\n")
    store.client().delete(streams.KEY.format(user_id=alice.id))
    return job


def url(job: Job) -> str:
    return f"/api/v1/jobs/{job.id}/log"


def test_a_follow_sends_what_the_worker_writes_until_the_job_ends(running, api, settings, alice):
    settings.JOB_POLL_SECONDS = 0.01
    response = api("owner").get(url(running), {"follow": "true"})
    assert response.status_code == 200 and response["Content-Type"] == "text/plain; charset=utf-8"
    assert response.is_async  # an ASGI server streams it; Django would read a sync one whole

    async def read() -> list[bytes]:
        body = response.streaming_content
        parts = [await anext(body)]
        await sync_to_async(services.append_log)(running.id, "two\n")
        parts.append(await anext(body))
        await sync_to_async(services.finish)(running.id, "succeeded", 0)
        return parts + [part async for part in body]

    assert async_to_sync(read)() == [b"one\n", b"two\n"]
    assert streams.open_streams(alice.id) == 0


def test_follows_wait_on_the_event_loop_not_in_a_thread(running, api, settings):
    """Ten follows of a job that does not end, read at once on one loop whose every query
    runs in the one test thread: they end together at the deadline. Waits that held that
    thread would take ten deadlines."""
    settings.JOB_POLL_SECONDS = 0.05
    settings.STREAM_FOLLOW_SECONDS = 0.4
    owner = api("owner")
    responses = [owner.get(url(running), {"follow": "true"}) for _ in range(10)]

    async def read_all() -> list[list[bytes]]:
        async def read(response) -> list[bytes]:
            return [part async for part in response.streaming_content]

        return await asyncio.gather(*(read(response) for response in responses))

    began = time.monotonic()
    bodies = async_to_sync(read_all)()
    took = time.monotonic() - began
    assert bodies == [[b"one\n"]] * 10
    assert took < 2.5, f"the follows took {took:.1f} s: they waited one after the other"


def test_a_follow_ends_at_the_sites_deadline_and_goes_on_from_since(running, api, settings, alice):
    settings.JOB_POLL_SECONDS = 0.02
    settings.STREAM_FOLLOW_SECONDS = 0.3  # asked for 60 s: the site's deadline wins
    owner = api("owner")
    first = owner.get(url(running), {"follow": "true", "seconds": 60})
    assert streamed(first) == [b"one\n"]  # the job runs on; the answer ended anyway
    assert streams.open_streams(alice.id) == 0
    services.append_log(running.id, "two\n")
    services.finish(running.id, "succeeded", 0)
    again = owner.get(url(running), {"follow": "true", "since": len("one\n")})
    assert streamed(again) == [b"two\n"]


def test_follows_over_the_per_user_limit_are_429_naming_it(running, api, settings, alice):
    settings.STREAMS_PER_USER = 1
    owner = api("owner")
    held = owner.get(url(running), {"follow": "true"})
    assert held.status_code == 200
    refused = owner.get(url(running), {"follow": "true"})
    assert refused.status_code == 429
    assert refused.json()["error"] == "too_many_streams" and refused.json()["limit"] == 1
    assert owner.get(url(running)).status_code == 200, "a plain read holds no slot"

    async def read_a_little_and_leave() -> None:
        body = held.streaming_content
        await anext(body)
        await body.aclose()  # what the server does when the client goes away

    async_to_sync(read_a_little_and_leave)()
    assert streams.open_streams(alice.id) == 0
    assert owner.get(url(running), {"follow": "true"}).status_code == 200


def test_the_follows_caps_are_a_cluster_logs_and_documented(running, api):
    owner = api("owner")
    too_long = owner.get(url(running), {"follow": "true", "seconds": 301})
    assert too_long.status_code == 400 and "seconds" in too_long.json()["fields"]
    schema = owner.get("/api/v1/schema/", {"format": "json"}).json()
    log = schema["paths"]["/api/v1/jobs/{id}/log"]["get"]
    assert "429" in log["responses"]
    [seconds] = [p for p in log["parameters"] if p["name"] == "seconds"]
    assert (seconds["schema"]["maximum"], seconds["schema"]["default"]) == (300, 60)
