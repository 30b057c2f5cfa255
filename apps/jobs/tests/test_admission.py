"""Fair shares of the job slots: a user's jobs past JOBS_PER_USER_RUNNING wait queued saying
why, a freed slot goes to the user running the fewest, the caps hold under submits at once,
and a job's task is sent only once it is admitted. The node layer is faked."""

import threading
import time
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.db.models import F

from apps.clusters import services as clusters
from apps.jobs import admission, services
from apps.jobs.models import Job, JobFile
from apps.jobs.services import JobRequest, Upload
from apps.nodes.fake import FakeNodes
from apps.tasks import bus
from workers.jobs import NOT_ADMITTED, run_job

from .conftest import make_cluster

User = get_user_model()
MAIN = Upload(JobFile.Role.MAIN, "app.py", b"import time; time.sleep(240)\n")
J = Job.State


def sleeper() -> JobRequest:
    return JobRequest(kind="pyspark", uploads=[MAIN])


@pytest.fixture
def sent(settings, monkeypatch) -> list[int]:
    """The ids of the jobs whose task was handed to the broker (after commit)."""
    settings.DISPATCH_CLUSTER_TASKS = True
    handed: list[int] = []

    def send(task: str, *args) -> bool:
        if task == "platter.run_job":
            handed.append(args[0])
        return True

    monkeypatch.setattr(bus, "send", send)
    return handed


@pytest.fixture
def slots(settings):
    settings.JOBS_PER_USER_RUNNING = 2
    settings.JOBS_RUNNING_MAX = 4
    return settings


def holding(user) -> list[int]:
    return sorted(Job.objects.filter(admission.HOLDS_SLOT, owner=user).values_list("id", flat=True))


def run_to_end(job_id: int) -> None:
    """The worker ends the job (its program exited), as workers/jobs.py does."""
    services.start(job_id)
    assert services.finish(job_id, J.SUCCEEDED, 0)


@pytest.mark.django_db
def test_a_users_jobs_past_the_limit_wait_saying_why_and_get_no_task(
    alice, spark, slots, sent, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        jobs = [services.submit(alice, spark, sleeper()) for _ in range(3)]
    assert [job.admitted is not None for job in jobs] == [True, True, False]
    assert jobs[2].reason == "waiting: you have 2 jobs running, the limit is 2"
    assert sent == [jobs[0].id, jobs[1].id]  # the third's task waits for its slot
    with FakeNodes() as nodes:  # a task sent by hand for it does nothing
        assert run_job(jobs[2].id) == NOT_ADMITTED
    assert nodes.calls == []
    assert Job.objects.get(id=jobs[2].id).state == J.QUEUED


@pytest.mark.django_db
def test_eight_long_jobs_of_alice_do_not_keep_bobs_short_one_waiting(
    alice, bob, slots, sent, django_capture_on_commit_callbacks
):
    """The issue's case: alice's eight 4-minute jobs, then bob's one-line job."""
    hers, his = make_cluster(alice), make_cluster(bob)
    with django_capture_on_commit_callbacks(execute=True):
        alices = [services.submit(alice, hers, sleeper()) for _ in range(8)]
        bobs = services.submit(bob, his, sleeper())
    assert holding(alice) == [alices[0].id, alices[1].id]
    assert bobs.admitted is not None and bobs.reason == ""
    assert sent == [alices[0].id, alices[1].id, bobs.id]


@pytest.mark.django_db
def test_a_freed_slot_goes_to_the_user_running_the_fewest_before_an_older_job(
    alice, bob, slots, sent, django_capture_on_commit_callbacks
):
    slots.JOBS_RUNNING_MAX = 2  # alice's two hold every slot of the portal
    hers, his = make_cluster(alice), make_cluster(bob)
    with django_capture_on_commit_callbacks(execute=True):
        alices = [services.submit(alice, hers, sleeper()) for _ in range(8)]
        bobs = services.submit(bob, his, sleeper())
    assert bobs.admitted is None
    assert bobs.reason.startswith("waiting for a free job slot: the portal runs at most 2 jobs")
    assert Job.objects.get(id=alices[2].id).reason == (
        "waiting: you have 2 jobs running, the limit is 2"
    )
    with django_capture_on_commit_callbacks(execute=True):
        run_to_end(alices[0].id)  # alice's third is older, but bob runs none
    assert holding(bob) == [bobs.id]
    assert holding(alice) == [alices[1].id]
    assert sent[-1] == bobs.id
    with django_capture_on_commit_callbacks(execute=True):
        run_to_end(alices[1].id)  # now each runs one: the slot is alice's oldest waiting
    assert holding(alice) == [alices[2].id]


@pytest.mark.django_db
def test_a_cancelled_job_and_a_stopped_cluster_free_their_slots(
    alice, spark, slots, sent, django_capture_on_commit_callbacks
):
    other = make_cluster(alice)
    with django_capture_on_commit_callbacks(execute=True):
        first, second = (services.submit(alice, spark, sleeper()) for _ in range(2))
        waiting = [services.submit(alice, other, sleeper()) for _ in range(3)]
    with django_capture_on_commit_callbacks(execute=True):
        services.cancel(first.id)  # admitted, not started yet: it ends at once
    assert holding(alice) == [second.id, waiting[0].id]
    with django_capture_on_commit_callbacks(execute=True):
        clusters.request_stop(spark.id, reason="by hand")
    assert Job.objects.get(id=second.id).state == J.FAILED
    assert holding(alice) == [waiting[0].id, waiting[1].id]
    assert sent[-1] == waiting[1].id


@pytest.mark.django_db
def test_a_task_the_broker_lost_is_sent_again_by_beats_pass(
    alice, spark, slots, sent, settings, django_capture_on_commit_callbacks
):
    settings.JOB_FOLLOWER_LOST_SECONDS = 60
    with django_capture_on_commit_callbacks(execute=True):
        job = services.submit(alice, spark, sleeper())
        assert admission.admission_pass() == []  # admitted already, and not stale yet
    assert sent == [job.id]
    Job.objects.filter(id=job.id).update(admitted=F("admitted") - timedelta(minutes=2))
    with django_capture_on_commit_callbacks(execute=True):
        admission.admission_pass()
    assert sent == [job.id, job.id]  # started once however often it is sent (start: a CAS)


@pytest.mark.django_db(transaction=True)
def test_the_caps_hold_when_many_submits_come_at_once(alice, bob, slots, sent, monkeypatch):
    """Four users submit two jobs each, all at once (threads, a database connection each);
    each pass takes a while between counting the slots and taking them, so passes that were
    not serialised would all count the same free slots."""
    slots.JOBS_RUNNING_MAX = 3
    waiting = admission._waiting

    def slow_waiting(per_user: int):
        found = waiting(per_user)
        time.sleep(0.2)
        return found

    monkeypatch.setattr(admission, "_waiting", slow_waiting)
    users = [alice, bob, *(User.objects.create_user(f"user{n}") for n in range(2))]
    submits = [(user, make_cluster(user)) for user in users for _ in range(2)]
    start = threading.Barrier(len(submits), timeout=30)
    errors: list[BaseException] = []

    def submit(user, cluster) -> None:
        try:
            start.wait()
            services.submit(user, cluster, sleeper())
        except BaseException as error:  # noqa: BLE001 (reported below)
            errors.append(error)
        finally:
            connection.close()

    threads = [threading.Thread(target=submit, args=pair) for pair in submits]
    for each in threads:
        each.start()
    for each in threads:
        each.join(timeout=60)
    assert errors == []
    assert Job.objects.count() == 8
    held = {user.username: holding(user) for user in users}
    assert sum(len(ids) for ids in held.values()) == 3, held
    assert all(len(ids) <= 2 for ids in held.values()), held
    assert sorted(sent) == sorted(i for ids in held.values() for i in ids)
    reasons = set(Job.objects.filter(admitted=None).values_list("reason", flat=True))
    assert reasons and all(reason.startswith("waiting") for reason in reasons)
