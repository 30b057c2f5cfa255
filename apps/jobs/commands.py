"""The commands a job runs in its cluster's master container: plain functions of the job row,
so what runs is tested without a cluster.

A job's files are in its own folder (FOLDER); it runs there, in a session of its own whose id
is written to .pid, so a cancel can stop the driver and every process it started; its output
(stdout and stderr, in the order written) goes to .log, which the worker reads in parts."""

import re
import shlex

from .models import Job

FOLDER = "/tmp/platter-jobs/{}"  # noqa: S108 (inside the cluster's master container)
LOG = ".log"
PID = ".pid"
# "Submitted application application_1764000000000_0001" (YARN); "Connected to Spark cluster
# with app ID app-20261125213000-0001" (the standalone master).
APPLICATION_ID = re.compile(r"\b(application_\d+_\d+|app-\d{14}-\d{4,})\b")
SPARK_KINDS = (Job.Kind.PYSPARK, Job.Kind.SPARK_JAR)


def folder(job: Job) -> str:
    return FOLDER.format(job.id)


# A MapReduce job's jar taken from HDFS is copied into the job's folder first (`hadoop jar`
# reads only local jars), inside the job's session so a cancel stops the copy too. The URI and
# the local name come as "$1" and "$2", never parsed by the shell.
FETCH_FROM_HDFS = (
    'mkdir -p "$(dirname "$2")" && hdfs dfs -get -f "$1" "$2" '
    '|| { echo "[platter] could not copy $1 from HDFS" >&2; exit 1; }; shift 2; exec "$@"'
)


def _local(job: Job, name: str) -> str:
    """An uploaded file's path in the container; a path already absolute stays as it is, and
    a file in HDFS is where FETCH_FROM_HDFS puts it."""
    if name.startswith("hdfs:"):
        return f"{folder(job)}/hdfs/{name.rsplit('/', 1)[-1]}"
    return name if name.startswith("/") else f"{folder(job)}/{name}"


def program(job: Job) -> list[str]:
    """spark-submit (client mode: the driver runs here, inside the cluster's network, against
    the master spark-defaults.conf names) or hadoop jar, with the job's files and options."""
    if job.kind == Job.Kind.MAPREDUCE:
        argv = ["hadoop", "jar", _local(job, job.main)]
        if job.main_class:
            argv.append(job.main_class)
        # Generic options follow the program name (ToolRunner programs, the examples).
        for key, value in sorted(job.properties.items()):
            argv += ["-D", f"{key}={value}"]
        return argv + list(job.args)
    argv = ["spark-submit", "--deploy-mode", "client", "--name", f"platter-job-{job.id}"]
    if job.kind == Job.Kind.SPARK_JAR:
        argv += ["--class", job.main_class]
    if job.py_files:
        argv += ["--py-files", ",".join(_local(job, n) for n in job.py_files)]
    if job.files:
        argv += ["--files", ",".join(_local(job, n) for n in job.files)]
    for key, value in sorted(job.properties.items()):
        argv += ["--conf", f"{key}={value}"]
    return [*argv, _local(job, job.main), *job.args]


def launcher(job: Job) -> list[str]:
    """The exec that runs the program: in the job's folder, in a new session (its id in .pid),
    output to .log; its exit code is the program's."""
    where = folder(job)
    inner = f'echo $$ >{PID}; exec "$@"'
    argv = program(job)
    if job.main.startswith("hdfs:"):
        fetch = [job.main, _local(job, job.main)]
        argv = ["sh", "-c", FETCH_FROM_HDFS, "platter-fetch", *fetch, *argv]
    run = shlex.join(["setsid", "-w", "sh", "-c", inner, "platter-job", *argv])
    return ["sh", "-c", f"cd {shlex.quote(where)} && exec {run} >{LOG} 2>&1"]


def environment(job: Job) -> dict[str, str]:
    # Hadoop's client prints warnings only by default: the log should show the application's
    # id and progress as spark-submit's does.
    if job.kind == Job.Kind.MAPREDUCE:
        return {"HADOOP_ROOT_LOGGER": "INFO,console"}
    # A PySpark driver's prints reach the log as they happen, not in one block at its exit
    # (which the JVM may not copy out before it exits itself).
    return {"PYTHONUNBUFFERED": "1"}


def kill(job: Job, grace_seconds: int = 10) -> list[str]:
    """Stop the job: YARN kills the application (it ends KILLED), then the driver's session
    gets TERM, and KILL after a grace period."""
    steps = []
    if job.kind == Job.Kind.MAPREDUCE and job.application_id.startswith("application_"):
        steps.append(f"yarn application -kill {shlex.quote(job.application_id)} || true")
    # procps' kill (through env): sh's own may not take "--" before a negative process group.
    group = f'"-$(cat {PID})"'
    steps.append(
        f"env kill -s TERM -- {group} 2>/dev/null; "
        f"for _ in $(seq {grace_seconds}); do "
        f"env kill -s 0 -- {group} 2>/dev/null || exit 0; sleep 1; "
        f"done; env kill -s KILL -- {group} 2>/dev/null; true"
    )
    return ["sh", "-c", f"cd {shlex.quote(folder(job))} && {'; '.join(steps)}"]


def hdfs_outputs(job: Job) -> list[str]:
    """Lists the output folder in HDFS, recursively (hdfs dfs -ls -R; no shell)."""
    return ["hdfs", "dfs", "-ls", "-R", job.output_path]


def outputs(job: Job) -> list[str]:
    """Lists the files under the job's output path: one "<size>\\t<relative path>" a line."""
    where = shlex.quote(f"{folder(job)}/{job.output_path}")
    return ["sh", "-c", f"find {where} -maxdepth 4 -type f -printf '%s\\t%P\\n' | head -n 1000"]


def application_id(text: str) -> str:
    """The first YARN or Spark application id in the text, or ""."""
    found = APPLICATION_ID.search(text)
    return found[1] if found else ""
