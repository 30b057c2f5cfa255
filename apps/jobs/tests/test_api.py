"""The jobs API: submit with files, read, follow the log, cancel; others get 404, read-only
tokens read only, caps answer 413 naming themselves."""

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from apps.audit.models import AuditEvent
from apps.jobs import services
from apps.jobs.models import Job

from .conftest import make_cluster
from .test_log_follow import streamed

pytestmark = pytest.mark.django_db


def submit(client, cluster, **extra):
    form = {
        "kind": "pyspark",
        "main": SimpleUploadedFile("app.py", b"print(1)\n"),
        "py_files": [SimpleUploadedFile("helper.py", b"X = 1\n")],
        "files": [SimpleUploadedFile("input.txt", b"a b a\n")],
        "args": ["--n", "3"],
        "properties": ["spark.executor.memory=512m"],
        "output": "out",
        **extra,
    }
    return client.post(f"/api/v1/clusters/{cluster.id}/jobs", form, format="multipart")


@pytest.fixture
def job(alice, spark, api):
    answer = submit(api("owner"), spark)
    assert answer.status_code == 202, answer.json()
    return Job.objects.get(id=answer.json()["id"])


def test_it_submits_with_files_args_and_properties(job, api):
    assert (job.kind, job.main, job.py_files, job.files) == (
        "pyspark",
        "app.py",
        ["helper.py"],
        ["input.txt"],
    )
    assert (job.args, job.properties, job.output_path) == (
        ["--n", "3"],
        {"spark.executor.memory": "512m"},
        "out",
    )
    shown = api("owner").get(f"/api/v1/jobs/{job.id}").json()
    assert (shown["state"], shown["cluster"], shown["owner"]) == ("queued", job.cluster_id, "alice")
    listed = api("owner").get(f"/api/v1/clusters/{job.cluster_id}/jobs").json()
    assert [j["id"] for j in listed["results"]] == [job.id]
    assert [j["id"] for j in api("owner").get("/api/v1/jobs").json()["results"]] == [job.id]


def test_a_json_submit_names_a_file_in_the_container(alice, hadoop, api):
    body = {
        "kind": "mapreduce",
        "main": "/opt/hadoop/share/hadoop/lib/hadoop-mapreduce-examples-3.4.2.jar",
        "main_class": "wordcount",
        "args": ["/in", "/out"],
        "properties": {"mapreduce.job.reduces": "1"},
    }
    answer = api("owner").post(f"/api/v1/clusters/{hadoop.id}/jobs", body, format="json")
    assert answer.status_code == 202, answer.json()
    assert answer.json()["args"] == ["/in", "/out"]


def test_others_get_404_for_jobs_and_clusters_they_cannot_see(job, api, spark):
    other = api("other")
    assert other.get(f"/api/v1/jobs/{job.id}").status_code == 404
    assert other.get(f"/api/v1/jobs/{job.id}/log").status_code == 404
    assert other.post(f"/api/v1/jobs/{job.id}/cancel").status_code == 404
    assert other.get(f"/api/v1/clusters/{spark.id}/jobs").status_code == 404
    assert submit(other, spark).status_code == 404
    assert other.get("/api/v1/jobs").json()["results"] == []
    assert api("admin").get(f"/api/v1/jobs/{job.id}").status_code == 200


def test_a_read_only_token_reads_but_neither_submits_nor_cancels(job, api, spark):
    reader = api("read_only")
    assert reader.get(f"/api/v1/jobs/{job.id}").status_code == 200
    assert reader.get(f"/api/v1/jobs/{job.id}/log").status_code == 200
    assert submit(reader, spark).status_code == 403
    assert reader.post(f"/api/v1/jobs/{job.id}/cancel").status_code == 403
    assert Job.objects.count() == 1
    assert Job.objects.get().state == "queued"


def test_cancel_is_audited_and_an_ended_job_answers_409(job, api):
    owner = api("owner")
    answer = owner.post(f"/api/v1/jobs/{job.id}/cancel")
    assert (answer.status_code, answer.json()["state"]) == (202, "killed")
    assert AuditEvent.objects.filter(action="job.cancel", object_id=job.id).exists()
    assert AuditEvent.objects.filter(action="job.submit", object_id=job.id).exists()
    again = owner.post(f"/api/v1/jobs/{job.id}/cancel")
    assert again.status_code == 409
    assert again.json()["message"] == f"job {job.id} already killed"


def test_a_stopped_cluster_refuses_with_its_state(alice, api):
    stopped = make_cluster(alice, "spark", "stopped")
    answer = submit(api("owner"), stopped)
    assert answer.status_code == 409
    assert "is stopped; jobs run only on a running cluster" in answer.json()["message"]


def test_a_file_over_the_cap_is_a_413_naming_the_cap(alice, spark, api, settings):
    settings.JOB_FILE_MAX_BYTES = 5
    answer = submit(api("owner"), spark)
    assert answer.status_code == 413
    assert answer.json()["message"] == "app.py is 9 bytes; the cap per file is 5 bytes"
    assert not Job.objects.exists()


def test_a_body_over_the_jobs_cap_is_a_413_naming_it(alice, spark, api, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    settings.JOB_UPLOAD_MAX_BYTES = 1000
    big = SimpleUploadedFile("input.txt", b"x" * 3000)
    answer = submit(api("owner"), spark, files=[big])
    assert answer.status_code == 413
    assert "a job's files may total 1000 bytes" in answer.json()["message"]


def test_bad_input_is_a_400_naming_the_field(alice, spark, api):
    answer = submit(api("owner"), spark, kind="spark-jar")
    assert answer.status_code == 400
    assert answer.json()["fields"] == {"main": "a spark-jar job's main file ends with .jar"}


def test_the_log_reads_from_a_position_and_follows_to_the_end(job, api):
    services.start(job.id)
    services.append_log(job.id, "line 1\nline 2\n")
    owner = api("owner")
    first = owner.get(f"/api/v1/jobs/{job.id}/log")
    assert (first.content, first["X-Log-Next"], first["X-Job-State"]) == (
        b"line 1\nline 2\n",
        "14",
        "running",
    )
    services.append_log(job.id, "line 3\n")
    services.finish(job.id, "succeeded", 0)
    followed = owner.get(f"/api/v1/jobs/{job.id}/log", {"since": 14, "follow": "true"})
    assert streamed(followed) == [b"line 3\n"]


def test_the_schema_documents_the_jobs_api(api):
    schema = api("owner").get("/api/v1/schema/", {"format": "json"}).json()
    for path in (
        "/api/v1/clusters/{cluster_id}/jobs",
        "/api/v1/jobs/{id}",
        "/api/v1/jobs/{id}/log",
        "/api/v1/jobs/{id}/cancel",
    ):
        assert path in schema["paths"], path
    assert (
        "multipart/form-data"
        in (schema["paths"]["/api/v1/clusters/{cluster_id}/jobs"]["post"]["requestBody"]["content"])
    )
