"""The worker's runner over fake nodes: files in, output into the log, the application id,
the state from the exit code; and the commands it runs."""

import pytest

from apps.jobs import commands, services
from apps.jobs.models import Job, JobFile
from apps.jobs.services import JobRequest, Upload
from apps.nodes.fake import FakeContainer, FakeNodes
from workers.jobs import run_job

pytestmark = pytest.mark.django_db
MAIN = Upload(JobFile.Role.MAIN, "app.py", b"print(1)\n")


def with_master(nodes: FakeNodes) -> FakeNodes:
    """The fake node holding the cluster's master container (conftest.make_cluster)."""
    nodes.on("lab-1")["c-master"] = FakeContainer("c-master", "c-master", {}, state="running")
    return nodes


@pytest.fixture
def job(alice, spark) -> Job:
    data = Upload(JobFile.Role.FILE, "input.txt", b"a b\n")
    return services.submit(alice, spark, JobRequest(kind="pyspark", uploads=[MAIN, data]))


def test_it_copies_the_files_runs_and_ends_succeeded_with_the_log(job, settings):
    settings.JOB_POLL_SECONDS = 0
    output = "INFO Connected to Spark cluster with app ID app-20261125213000-0001\nresult 42\n"
    with FakeNodes() as nodes:
        with_master(nodes)
        nodes.program = (0, output.encode())
        assert run_job(job.id) == "succeeded"
    job.refresh_from_db()
    assert (job.state, job.exit_code, job.application_id) == (
        "succeeded",
        0,
        "app-20261125213000-0001",
    )
    assert job.log == output
    assert nodes.files[("lab-1", f"/tmp/platter-jobs/{job.id}/input.txt")] == b"a b\n"
    assert nodes.started == [commands.launcher(job)]


def test_a_program_that_exits_non_zero_ends_failed_with_its_code(job, settings):
    settings.JOB_POLL_SECONDS = 0
    with FakeNodes() as nodes:
        with_master(nodes)
        nodes.program = (1, b"Traceback (most recent call last):\nValueError: no\n")
        assert run_job(job.id) == "failed"
    job.refresh_from_db()
    assert (job.exit_code, job.reason) == (1, "the program exited with code 1")
    assert "ValueError: no" in job.log


def test_a_job_cancelled_before_it_ran_is_not_run(job):
    services.cancel(job.id)
    with FakeNodes() as nodes:
        assert run_job(job.id) == "killed"
    assert nodes.started == []


def test_a_node_that_does_not_answer_fails_the_job_saying_so(job):
    with FakeNodes() as nodes:
        nodes.down("lab-1")
        assert run_job(job.id) == "failed"
    job.refresh_from_db()
    assert job.reason.startswith("could not start the job: node lab-1")


def test_the_commands_of_each_kind(alice, spark, hadoop):
    py = services.submit(
        alice,
        spark,
        JobRequest(
            kind="pyspark",
            args=["a b"],
            properties={"spark.x": "1"},
            uploads=[MAIN, Upload(JobFile.Role.PY_FILE, "m.py", b"")],
        ),
    )
    where = f"/tmp/platter-jobs/{py.id}"
    assert commands.program(py) == [
        "spark-submit",
        "--deploy-mode",
        "client",
        "--name",
        f"platter-job-{py.id}",
        "--py-files",
        f"{where}/m.py",
        "--conf",
        "spark.x=1",
        f"{where}/app.py",
        "a b",
    ]
    jar = services.submit(
        alice, spark, JobRequest(kind="spark-jar", main="/opt/x.jar", main_class="org.X")
    )
    assert commands.program(jar)[-3:] == ["--class", "org.X", "/opt/x.jar"]
    mr = services.submit(
        alice,
        hadoop,
        JobRequest(kind="mapreduce", main="/e.jar", main_class="wordcount", args=["/i", "/o"]),
    )
    assert commands.program(mr) == ["hadoop", "jar", "/e.jar", "wordcount", "/i", "/o"]
    assert commands.environment(mr) == {"HADOOP_ROOT_LOGGER": "INFO,console"}
    mr.application_id = "application_1_0001"
    assert "yarn application -kill application_1_0001" in commands.kill(mr)[-1]
    assert commands.application_id("Submitted application application_17_0002\n") == (
        "application_17_0002"
    )
