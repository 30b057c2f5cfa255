"""The rules of jobs: where they may run, what they may carry, how their state moves."""

import pytest

from apps.audit.models import AuditEvent
from apps.clusters import services as clusters
from apps.clusters.models import Cluster
from apps.jobs import services
from apps.jobs.models import Job, JobFile
from apps.jobs.services import JobRefused, JobRequest, Upload, UploadTooLarge

from .conftest import make_cluster

pytestmark = pytest.mark.django_db
MAIN = Upload(JobFile.Role.MAIN, "app.py", b"print('hi')\n")


def pyspark(**kwargs) -> JobRequest:
    return JobRequest(kind="pyspark", uploads=[MAIN], **kwargs)


def test_it_queues_a_job_with_its_files_and_audits_it(alice, spark):
    helper = Upload(JobFile.Role.PY_FILE, "helper.py", b"X = 1\n")
    data = Upload(JobFile.Role.FILE, "input.txt", b"a b\n")
    job = services.submit(alice, spark, JobRequest(kind="pyspark", uploads=[MAIN, helper, data]))
    assert (job.state, job.main, job.py_files, job.files) == (
        "queued",
        "app.py",
        ["helper.py"],
        ["input.txt"],
    )
    assert {f.name: bytes(f.content) for f in job.uploads.all()} == {
        "app.py": MAIN.content,
        "helper.py": b"X = 1\n",
        "input.txt": b"a b\n",
    }
    audit = AuditEvent.objects.get(action="job.submit")
    assert (audit.actor, audit.object_id, audit.detail["files"]) == (alice, job.id, 3)


@pytest.mark.parametrize("state", ["stopped", "queued", "destroyed", "failed"])
def test_it_refuses_a_cluster_that_is_not_running_saying_its_state(alice, state):
    cluster = make_cluster(alice, "spark", state)
    with pytest.raises(JobRefused, match=f"is {state}.*only on a running cluster") as refused:
        services.submit(alice, cluster, pyspark())
    assert refused.value.status == 409
    assert not Job.objects.exists()


def test_it_refuses_a_product_whose_plugin_has_no_job_kinds(alice):
    cluster = make_cluster(alice, "demo")
    with pytest.raises(JobRefused, match="runs demo, whose version runs no jobs"):
        services.submit(alice, cluster, pyspark())
    assert not Job.objects.exists()


def test_the_job_kinds_follow_the_versions_plugin_not_the_product_name(alice):
    """A Spark product renamed in the admin still runs Spark jobs; one whose version names
    no plugin runs none."""
    renamed = make_cluster(alice, "spark")
    renamed.version.product.name = "my-spark"
    renamed.version.product.save()
    assert services.submit(alice, renamed, pyspark()).kind == "pyspark"
    bare = make_cluster(alice, "cassandra")
    assert services.job_kinds(bare) == ()
    with pytest.raises(JobRefused, match="whose version runs no jobs"):
        services.submit(alice, bare, pyspark())


def test_it_refuses_a_kind_the_product_does_not_run(alice, hadoop, spark):
    with pytest.raises(JobRefused, match="a hadoop cluster runs mapreduce jobs, not pyspark"):
        services.submit(alice, hadoop, pyspark())
    jar = JobRequest(kind="mapreduce", main="/opt/x.jar")
    with pytest.raises(JobRefused, match="runs pyspark, spark-jar jobs, not mapreduce"):
        services.submit(alice, spark, jar)


@pytest.mark.parametrize(
    ("asked", "words"),
    [
        (JobRequest(kind="pig"), "unknown kind 'pig'"),
        (JobRequest(kind="pyspark"), "upload the main file"),
        (JobRequest(kind="pyspark", main="app.py"), "upload it, give an absolute path"),
        (JobRequest(kind="spark-jar", main="/x.py"), "ends with .jar"),
        (JobRequest(kind="spark-jar", main="/x.jar"), "names its main class"),
        (pyspark(output_path="../etc"), "a relative path within the job's folder"),
        (pyspark(output_path="hdfs:///out"), "only Hadoop clusters have HDFS"),
        (JobRequest(kind="pyspark", main="hdfs:///app.py"), "only Hadoop clusters have HDFS"),
        (pyspark(properties={"a b": "1"}), "property 'a b'"),
        (
            JobRequest(kind="pyspark", uploads=[MAIN, Upload("file", "../x", b"")]),
            "letters, digits",
        ),
        (
            JobRequest(kind="pyspark", uploads=[MAIN, Upload("file", "app.py", b"")]),
            "same name",
        ),
    ],
)
def test_it_refuses_bad_input_naming_the_field(alice, spark, asked, words):
    with pytest.raises(JobRefused, match=words) as refused:
        services.submit(alice, spark, asked)
    assert refused.value.status == 400 and refused.value.field


def test_it_refuses_a_file_over_the_cap_naming_the_cap(alice, spark, settings):
    settings.JOB_FILE_MAX_BYTES = 10
    with pytest.raises(UploadTooLarge, match=r"app\.py is 12 bytes; the cap per file is 10 bytes"):
        services.submit(alice, spark, pyspark())


def test_it_refuses_files_over_the_cap_per_job_naming_it(alice, spark, settings):
    settings.JOB_UPLOAD_MAX_BYTES = 20
    extra = Upload(JobFile.Role.FILE, "in.txt", b"0123456789")
    with pytest.raises(UploadTooLarge, match="total 22 bytes; the cap per job is 20 bytes"):
        services.submit(alice, spark, JobRequest(kind="pyspark", uploads=[MAIN, extra]))


def test_a_queued_job_cancelled_ends_killed_at_once_and_is_audited(alice, spark):
    job = services.submit(alice, spark, pyspark())
    services.cancel(job.id, actor=alice)
    job.refresh_from_db()
    assert (job.state, job.reason) == ("killed", "cancelled before it ran")
    assert job.ended is not None
    assert AuditEvent.objects.filter(action="job.cancel", object_id=job.id).count() == 1
    assert not services.start(job.id), "the worker finds it killed and does not run it"


def test_a_running_job_cancelled_is_marked_for_its_worker_once(alice, spark):
    job = services.submit(alice, spark, pyspark())
    assert services.start(job.id)
    services.cancel(job.id, actor=alice)
    services.cancel(job.id, actor=alice)
    job.refresh_from_db()
    assert (job.state, job.cancel_requested) == ("running", True)
    assert AuditEvent.objects.filter(action="job.cancel", object_id=job.id).count() == 1


def test_an_ended_job_cannot_be_cancelled(alice, spark):
    job = services.submit(alice, spark, pyspark())
    services.start(job.id)
    assert services.finish(job.id, "succeeded", 0)
    with pytest.raises(JobRefused, match=f"job {job.id} already succeeded"):
        services.cancel(job.id)


def test_stopping_the_cluster_ends_its_live_jobs_failed_with_the_reason(alice, spark):
    running = services.submit(alice, spark, pyspark())
    services.start(running.id)
    queued = services.submit(alice, spark, pyspark())
    done = services.submit(alice, spark, pyspark())
    services.start(done.id)
    services.finish(done.id, "succeeded", 0)
    clusters.request_stop(spark.id, actor=alice)
    states = dict(Job.objects.values_list("id", "state"))
    assert states == {running.id: "failed", queued.id: "failed", done.id: "succeeded"}
    assert Job.objects.get(id=running.id).reason == "the cluster is stopping"
    assert not services.finish(running.id, "succeeded", 0), "the worker's end loses"


def test_a_failed_cluster_ends_its_jobs_with_its_failure(alice, spark):
    from apps.clusters.transitions import transition

    job = services.submit(alice, spark, pyspark())
    services.start(job.id)
    transition(spark.id, Cluster.State.RUNNING, Cluster.State.FAILED, "node lab-1 is down")
    job.refresh_from_db()
    assert (job.state, job.reason) == ("failed", "the cluster is failed: node lab-1 is down")


def test_the_log_keeps_its_last_characters_and_counts_those_dropped(alice, spark, settings):
    settings.JOB_LOG_MAX_CHARS = 10
    job = services.submit(alice, spark, pyspark())
    services.append_log(job.id, "0123456")
    services.append_log(job.id, "789abcdef")
    job.refresh_from_db()
    assert (job.log, job.log_start) == ("6789abcdef", 6)
    part = services.log_since(job, 2)
    assert (part.text, part.next, part.dropped) == ("6789abcdef", 16, 4)
    assert services.log_since(job, 14).text == "ef"
    assert services.log_since(job, 16).text == ""


@pytest.mark.parametrize(
    ("main", "output", "words"),
    [
        # An authority would name a NameNode: another cluster's, perhaps.
        ("hdfs://10.214.5.10:8020/wc.jar", "", "the cluster's own HDFS"),
        ("hdfs:///jars/../../wc.jar", "", "the cluster's own HDFS"),
        ("hdfs:///jars/wc.jar", "hdfs:///out/$(id)", "the cluster's own HDFS"),
        ("hdfs:wc.jar", "", "the cluster's own HDFS"),
    ],
)
def test_hdfs_paths_name_the_clusters_own_hdfs(alice, hadoop, main, output, words):
    asked = JobRequest(kind="mapreduce", main=main, main_class="wordcount", output_path=output)
    with pytest.raises(JobRefused, match=words) as refused:
        services.submit(alice, hadoop, asked)
    assert refused.value.field in ("main", "output")


def test_a_mapreduce_job_takes_its_jar_from_hdfs_and_writes_its_output_there(alice, hadoop):
    asked = JobRequest(
        kind="mapreduce",
        main="hdfs:///user/alice/wc.jar",
        main_class="wordcount",
        args=["hdfs:///in", "hdfs:///out/wc"],
        output_path="hdfs:///out/wc",
    )
    job = services.submit(alice, hadoop, asked)
    assert (job.main, job.output_path) == ("hdfs:///user/alice/wc.jar", "hdfs:///out/wc")
