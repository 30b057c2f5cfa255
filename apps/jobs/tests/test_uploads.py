"""A job's uploads leave the database when it ends, however it ends; the uploads of a user's
jobs not yet ended are capped all together (413 naming the cap and what the user holds), and
the cap holds when submits come at once."""

import threading

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import connection

from apps.clusters import services as clusters
from apps.jobs import services
from apps.jobs.models import Job, JobFile
from apps.jobs.services import JobRequest, Upload, UploadTooLarge
from apps.nodes.fake import FakeContainer, FakeNodes
from workers.jobs import run_job

from .conftest import make_cluster

J = Job.State


def request(size: int, name: str = "input.txt") -> JobRequest:
    main = Upload(JobFile.Role.MAIN, "app.py", b"print(1)\n")
    return JobRequest(kind="pyspark", uploads=[main, Upload(JobFile.Role.FILE, name, b"x" * size)])


def stored(job: Job) -> list[str]:
    return sorted(JobFile.objects.filter(job=job).values_list("name", flat=True))


@pytest.mark.django_db
def test_the_uploads_are_gone_once_the_worker_ran_the_job(alice, spark, settings):
    settings.JOB_POLL_SECONDS = 0
    job = services.submit(alice, spark, request(100))
    assert stored(job) == ["app.py", "input.txt"]
    with FakeNodes() as nodes:
        nodes.on("lab-1")["c-master"] = FakeContainer("c-master", "c-master", {}, state="running")
        nodes.program = (0, b"done\n")
        assert run_job(job.id) == J.SUCCEEDED
    assert nodes.files[("lab-1", f"/tmp/platter-jobs/{job.id}/input.txt")] == b"x" * 100
    assert stored(job) == []  # in the container it ran in, no longer in the database


@pytest.mark.django_db
@pytest.mark.parametrize("ending", ["cancelled", "failed", "cluster stopped"])
def test_the_uploads_are_gone_however_the_job_ends(alice, spark, ending):
    job = services.submit(alice, spark, request(100))
    other = services.submit(alice, make_cluster(alice), request(100))
    if ending == "cancelled":
        services.cancel(job.id)
    elif ending == "failed":
        services.start(job.id)
        services.finish(job.id, J.FAILED, 1, "the program exited with code 1")
    else:
        clusters.request_stop(spark.id, reason="by hand")
    assert Job.objects.get(id=job.id).done
    assert stored(job) == []
    assert stored(other) == ["app.py", "input.txt"]  # another job's, still queued


@pytest.mark.django_db
def test_past_the_users_cap_a_submit_is_refused_naming_the_cap_and_what_is_held(
    alice, bob, spark, settings
):
    settings.JOB_UPLOADS_PER_USER_MAX_BYTES = 1000
    first = services.submit(alice, spark, request(600))  # 609 bytes with app.py
    with pytest.raises(UploadTooLarge) as refused:
        services.submit(alice, spark, request(600))
    assert refused.value.status == 413
    assert str(refused.value).startswith(
        "your queued and running jobs hold 609 bytes of uploads and this job's files add "
        "609 bytes; the cap per user is 1000 bytes"
    )
    assert Job.objects.filter(owner=alice).count() == 1
    services.submit(bob, make_cluster(bob), request(600))  # bob's are his own
    services.cancel(first.id)  # its uploads leave: room again
    services.submit(alice, spark, request(600))


@pytest.mark.django_db
def test_the_api_answers_413_with_the_users_cap(alice, spark, api, settings):
    settings.JOB_UPLOADS_PER_USER_MAX_BYTES = 1000
    services.submit(alice, spark, request(900))
    form = {"kind": "pyspark", "main": SimpleUploadedFile("app.py", b"x" * 200)}
    answer = api("owner").post(f"/api/v1/clusters/{spark.id}/jobs", form, format="multipart")
    assert answer.status_code == 413
    assert "hold 909 bytes of uploads" in answer.json()["message"]
    assert "the cap per user is 1000 bytes" in answer.json()["message"]


@pytest.mark.django_db(transaction=True)
def test_the_cap_holds_when_submits_come_at_once(alice, settings):
    settings.JOB_UPLOADS_PER_USER_MAX_BYTES = 2000
    targets = [make_cluster(alice) for _ in range(6)]
    start = threading.Barrier(len(targets), timeout=30)
    outcomes: list[str] = []

    def submit(cluster) -> None:
        try:
            start.wait()
            services.submit(alice, cluster, request(600))
            outcomes.append("queued")
        except UploadTooLarge:
            outcomes.append("413")
        finally:
            connection.close()

    threads = [threading.Thread(target=submit, args=(cluster,)) for cluster in targets]
    for each in threads:
        each.start()
    for each in threads:
        each.join(timeout=60)
    assert sorted(outcomes) == ["413"] * 3 + ["queued"] * 3  # 3 x 609 bytes fit in 2000
    assert services.uploads_held(alice) == 3 * 609
