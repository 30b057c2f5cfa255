"""The worker's runner over fake nodes: files in, output into the log, the application id,
the state from the exit code; and the commands it runs."""

import subprocess

import pytest

from apps.jobs import commands, results, services
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


def test_a_jar_in_hdfs_is_copied_into_the_jobs_folder_first(alice, hadoop, tmp_path):
    """The launcher's copy step, run by a real sh with a stand-in `hdfs` on the PATH: the jar
    lands where `hadoop jar` is told to read it, and a failed copy ends the job, saying so."""
    mr = services.submit(
        alice,
        hadoop,
        JobRequest(kind="mapreduce", main="hdfs:///jars/wc.jar", main_class="wordcount"),
    )
    local = f"{commands.folder(mr)}/hdfs/wc.jar"
    assert commands.program(mr)[:3] == ["hadoop", "jar", local]
    script = commands.launcher(mr)[-1]
    assert commands.FETCH_FROM_HDFS in script  # the user's URI is an argument, not script
    fetch = ["sh", "-c", commands.FETCH_FROM_HDFS, "platter-fetch"]
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "hdfs").write_text('#!/bin/sh\n[ "$4" = hdfs:///jars/wc.jar ] && echo jar > "$5"\n')
    (bin_dir / "hdfs").chmod(0o755)
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin"}
    target = tmp_path / "job" / "hdfs" / "wc.jar"
    ran = subprocess.run(
        [*fetch, "hdfs:///jars/wc.jar", str(target), "cat", str(target)],
        env=env,
        capture_output=True,
        text=True,
    )
    assert (ran.returncode, ran.stdout) == (0, "jar\n")
    missing = subprocess.run(
        [*fetch, "hdfs:///jars/none.jar", str(tmp_path / "x.jar"), "echo", "ran"],
        env=env,
        capture_output=True,
        text=True,
    )
    assert missing.returncode == 1 and "ran" not in missing.stdout
    assert "could not copy hdfs:///jars/none.jar from HDFS" in missing.stderr


def test_an_hdfs_listing_gives_the_outputs_files_relative_to_the_output_path():
    listing = (
        "2026-11-26 00:40:01,123 WARN util.NativeCodeLoader: Unable to load native-hadoop\n"
        "-rw-r--r--   2 root supergroup          0 2026-11-26 00:40 hdfs://c7-master-0:8020"
        "/out/wc/_SUCCESS\n"
        "drwxr-xr-x   - root supergroup          0 2026-11-26 00:40 /out/wc/logs\n"
        "-rw-r--r--   2 root supergroup         42 2026-11-26 00:40 /out/wc/part r 00000\n"
        "-rw-r--r--   2 root supergroup          7 2026-11-26 00:40 /out/wcx/elsewhere\n"
    )
    assert results.hdfs_files("hdfs:///out/wc/", listing) == [
        results.OutputFile("_SUCCESS", 0),
        results.OutputFile("part r 00000", 42),
    ]
