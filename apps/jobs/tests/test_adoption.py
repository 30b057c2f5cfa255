"""A job whose worker died is followed on by another: from the exec and the .log offset kept on
its row, every line exactly once; a lost follower is claimed once however many passes run;
a program the node no longer knows ends the job saying why. The node is faked."""

import threading
from datetime import timedelta

import pytest
from django.db import connection
from django.db.models import F
from django.utils import timezone

from apps.jobs import services
from apps.jobs.models import Job, JobFile
from apps.jobs.services import JobRequest, Upload
from apps.nodes import NodeMissing
from apps.nodes.fake import FakeContainer, FakeNodes
from apps.tasks import bus
from portal.celery import app
from workers import jobs as runner
from workers import tasks  # noqa: F401 (registers the platter.* tasks with the app)

MAIN = Upload(JobFile.Role.MAIN, "app.py", b"print(1)\n")
APP_ID = "app-20261125213000-0001"


class WorkerDied(BaseException):
    """The worker process going away between two polls (killed, restarted): nothing of the
    follower runs after it, not even an except clause for Exception."""


@pytest.fixture
def job(alice, spark) -> Job:
    return services.submit(alice, spark, JobRequest(kind="pyspark", uploads=[MAIN]))


@pytest.fixture
def nodes():
    with FakeNodes() as fake:
        fake.on("lab-1")["c-master"] = FakeContainer("c-master", "c-master", {}, state="running")
        yield fake


@pytest.fixture
def sent(settings, monkeypatch) -> list[tuple[str, tuple]]:
    """The tasks handed to the broker (after commit), instead of a broker."""
    settings.DISPATCH_CLUSTER_TASKS = True
    handed: list[tuple[str, tuple]] = []
    monkeypatch.setattr(bus, "send", lambda task, *args: handed.append((task, args)))
    return handed


def age_heartbeat(job_id: int, minutes: int = 5) -> None:
    Job.objects.filter(id=job_id).update(followed_at=F("followed_at") - timedelta(minutes=minutes))


def split_inside_a_character(output: bytes, at: int) -> bool:
    return 0x80 <= output[at] < 0xC0  # a continuation byte: the cut is inside a character


@pytest.mark.django_db
@pytest.mark.parametrize(("code", "state"), [(0, "succeeded"), (3, "failed")])
def test_a_job_whose_follower_died_is_adopted_and_logs_every_line_once(
    job, nodes, sent, settings, monkeypatch, django_capture_on_commit_callbacks, code, state
):
    settings.JOB_POLL_SECONDS = 0
    monkeypatch.setattr(runner, "READ_BYTES", 16)  # several reads a poll, cuts anywhere
    lines = [f"line {i:02} grüße\n" for i in range(30)]
    lines[25] = f"INFO Connected to Spark cluster with app ID {APP_ID}\n"  # after the death
    output = "".join(lines).encode()
    step = 37  # the program writes this many bytes between two polls
    # The worker dies after a poll that read up to the middle of a character ("ü" is 2 bytes).
    dies_after = next(k for k in range(2, 10) if split_inside_a_character(output, k * step))
    polls = 0

    def program_writes_on() -> None:  # the follower's pause between polls
        nonlocal polls
        polls += 1
        if polls == dies_after:
            raise WorkerDied
        shown = min(len(output), (polls + 1) * step)
        nodes.program = (code if shown == len(output) else None, output[:shown])

    monkeypatch.setattr(runner, "_pause", program_writes_on)
    nodes.program = (None, output[:step])
    with pytest.raises(WorkerDied):
        runner.run_job(job.id)

    job.refresh_from_db()
    read = dies_after * step
    assert (job.state, job.exec_id) == ("running", "exec1")
    # What is in the log is exactly the bytes before the saved offset: the cut character's
    # first byte was read but is left for the next follower.
    assert job.log_offset == read - 1
    assert job.log.encode() == output[: job.log_offset]
    # The program goes on writing while nobody follows it.
    nodes.program = (None, output[: read + 3 * step])
    polls = dies_after + 2

    assert services.adopt_lost_jobs() == [], "a fresh heartbeat: its follower may be alive"
    age_heartbeat(job.id)
    with django_capture_on_commit_callbacks(execute=True):
        assert services.adopt_lost_jobs() == [job.id]
    [(task, args)] = sent
    assert task == "platter.follow_job"
    assert app.tasks[task](*args) == state  # the task body, here instead of in a worker

    job.refresh_from_db()
    assert (job.state, job.exit_code, job.application_id) == (state, code, APP_ID)
    assert job.log == output.decode()  # every line once, in order: none twice, none lost
    assert job.log_offset == len(output)
    assert nodes.started == [nodes.started[0]], "the program ran once"


@pytest.mark.django_db
def test_a_follower_that_was_only_slow_stops_at_its_next_write(job, sent):
    lease = services.start(job.id)
    assert lease is not None
    assert services.followed(job.id, lease, "one\n", 4) is not None
    age_heartbeat(job.id)
    assert services.adopt_lost_jobs() == [job.id]
    assert services.followed(job.id, lease, "one\n", 4) is None  # taken over: nothing written
    job.refresh_from_db()
    assert (job.log, job.log_offset) == ("one\n", 4)


@pytest.mark.django_db
def test_a_program_unknown_to_the_node_ends_the_job_failed_saying_why(
    job, nodes, sent, django_capture_on_commit_callbacks
):
    lease = services.start(job.id)
    assert lease is not None
    services.record_exec(job.id, "exec-before-the-restart", lease)
    services.followed(job.id, lease, "started\n", 8)
    age_heartbeat(job.id)
    with django_capture_on_commit_callbacks(execute=True):
        services.adopt_lost_jobs()
    nodes.fail("exec_status", NodeMissing("lab-1", "inspect an exec: No such exec instance"))
    [(task, args)] = sent
    assert app.tasks[task](*args) == "failed"
    job.refresh_from_db()
    assert job.state == "failed" and job.exit_code is None
    assert job.reason.startswith("the job's program is gone from its container: the cluster's")
    assert job.log == "started\n"


@pytest.mark.django_db
def test_a_job_lost_before_its_exec_was_noted_ends_failed_and_its_program_is_stopped(
    job, nodes, sent, django_capture_on_commit_callbacks
):
    services.start(job.id)  # ...and the worker died before start_exec answered
    age_heartbeat(job.id)
    with django_capture_on_commit_callbacks(execute=True):
        services.adopt_lost_jobs()
    [(task, args)] = sent
    assert app.tasks[task](*args) == "failed"
    job.refresh_from_db()
    assert (job.state, job.reason) == ("failed", runner.LOST_AT_START)
    assert ("lab-1", "exec", "c-master") in nodes.calls  # the kill, in case it had started


@pytest.mark.django_db
def test_a_follow_task_that_waited_past_a_newer_claim_does_nothing(
    job, nodes, sent, django_capture_on_commit_callbacks
):
    services.start(job.id)
    for _ in range(2):  # the first task waited in the queue so long the next pass claimed again
        age_heartbeat(job.id)
        with django_capture_on_commit_callbacks(execute=True):
            assert services.adopt_lost_jobs() == [job.id]
    (task, first_args), _second = sent
    assert app.tasks[task](*first_args) == runner.TAKEN_OVER
    assert nodes.calls == [], "it left the job to the second"


@pytest.mark.django_db(transaction=True)
def test_two_passes_at_once_claim_a_lost_job_once(job, sent, monkeypatch):
    services.start(job.id)
    age_heartbeat(job.id)
    both_listed = threading.Barrier(2, timeout=10)
    listed = services.lost_jobs

    def lost_jobs(cutoff):  # each pass finds the job lost before either claims it
        found = listed(cutoff)
        both_listed.wait()
        return found

    monkeypatch.setattr(services, "lost_jobs", lost_jobs)
    adopted: list[list[int]] = []

    def adoption_pass() -> None:
        try:
            adopted.append(services.adopt_lost_jobs())
        finally:
            connection.close()

    passes = [threading.Thread(target=adoption_pass) for _ in range(2)]
    for each in passes:
        each.start()
    for each in passes:
        each.join(timeout=30)
    assert sorted(adopted) == [[], [job.id]]
    assert [task for task, _args in sent] == ["platter.follow_job"]
    followed_at = Job.objects.get(id=job.id).followed_at
    assert followed_at is not None and timezone.now() - followed_at < timedelta(seconds=30)
