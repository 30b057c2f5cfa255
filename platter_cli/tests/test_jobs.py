"""`platter jobs` against the live test server, without a worker: the test plays the worker
(its log lines and its end), so the command's streaming and exit codes are what is tested."""

import subprocess
import time

import pytest

from apps.jobs import services
from apps.jobs.models import Job
from apps.jobs.tests.conftest import make_cluster

from .conftest import PLATTER, user_environment

pytestmark = pytest.mark.django_db(transaction=True)


def submitted(seconds: float = 60) -> Job:
    deadline = time.monotonic() + seconds
    while not (job := Job.objects.first()):
        assert time.monotonic() < deadline, "the command submitted no job"
        time.sleep(0.1)
    return job


@pytest.mark.parametrize(("end", "code"), [("succeeded", 0), ("failed", 1), ("killed", 1)])
def test_submit_wait_streams_the_log_and_exits_with_the_jobs_end(
    logged_in, home, alice, tmp_path, end, code
):
    cluster = make_cluster(alice, "spark")
    app = tmp_path / "app.py"
    app.write_text("print(1)\n")
    (tmp_path / "lib.py").write_text("X = 1\n")
    argv = [
        "jobs",
        "submit",
        "spark",
        cluster.name,
        str(app),
        "--py-files",
        str(tmp_path / "lib.py"),
    ]
    waiting = subprocess.Popen(
        [str(PLATTER), *argv, "--", "--n", "3", "--wait"],
        env=user_environment(home),
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    job = submitted()
    assert (job.kind, job.args, job.py_files) == ("pyspark", ["--n", "3"], ["lib.py"])
    services.start(job.id)
    services.append_log(job.id, "first line\n")
    services.append_log(job.id, "last line\n")
    services.finish(job.id, end, 0 if end == "succeeded" else 1, "" if code == 0 else "why")
    stdout, stderr = waiting.communicate(timeout=120)
    assert waiting.returncode == code, stderr
    assert stdout == "first line\nlast line\n"
    assert f"Job {job.id} {end}" in stderr


def test_ls_show_logs_and_kill(logged_in, alice):
    cluster = make_cluster(alice, "hadoop")
    examples = "/opt/hadoop/share/hadoop/lib/hadoop-mapreduce-examples-3.4.2.jar"
    ran = logged_in(
        "jobs", "submit", "mapreduce", str(cluster.id), examples, "--class", "pi", "--", "2", "10"
    )
    assert ran.returncode == 0, ran
    job = Job.objects.get()
    assert (job.main, job.main_class, job.args) == (examples, "pi", ["2", "10"])
    assert f"{job.id}" in logged_in("jobs", "ls").stdout
    assert logged_in("jobs", "ls", cluster.name, "--json").json()[0]["id"] == job.id
    assert "main_class: pi" in logged_in("jobs", "show", str(job.id)).stdout
    services.append_log(job.id, "hello\n")
    assert logged_in("jobs", "logs", str(job.id)).stdout == "hello\n"
    killed = logged_in("jobs", "kill", str(job.id))
    assert (killed.returncode, killed.stdout) == (0, f"Job {job.id}: killed.\n")
    again = logged_in("jobs", "kill", str(job.id))
    assert again.returncode == 1 and f"job {job.id} already killed" in again.stderr
    assert logged_in("jobs", "show", "999999").returncode == 4


def test_a_missing_program_is_a_usage_error(logged_in, alice):
    cluster = make_cluster(alice, "spark")
    ran = logged_in("jobs", "submit", "spark", cluster.name, "nope.py")
    assert ran.returncode == 2 and "PROGRAM: no such file nope.py" in ran.stderr
