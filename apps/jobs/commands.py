"""The commands a job runs in its cluster's master container: plain functions of the job row,
so what runs is tested without a cluster.

A job's files are in its own folder (FOLDER); it runs there, in a session of its own whose id
is written to .pid, so a cancel can stop the driver and every process it started; its output
(stdout and stderr, in the order written) goes to .log, which the worker reads in parts."""

import re
import shlex

from apps.products.base import ProductPlugin
from apps.products.registry import PLUGINS, plugin_for

from .models import Job

FOLDER = "/tmp/platter-jobs/{}"  # noqa: S108 (inside the cluster's master container)
LOG = ".log"
PID = ".pid"
# Any plugin's application id (YARN's application_..., Spark's app-...), for readers of logs
# that know no cluster (bench/jobs.py).
APPLICATION_ID = re.compile(
    "|".join(p.application_id.pattern for p in PLUGINS.values() if p.application_id)
)


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


def plugin_of(job: Job) -> ProductPlugin:
    return plugin_for(job.cluster.definition)


def program(job: Job) -> list[str]:
    """The product's program for the job's kind (its plugin's: spark-submit, hadoop jar),
    with the job's files and options."""
    return plugin_of(job).job_argv(job, lambda name: _local(job, name))


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
    return plugin_of(job).job_environment(job)


def kill(job: Job, grace_seconds: int = 10) -> list[str]:
    """Stop the job: the product's own steps first (YARN kills the application, which ends
    KILLED), then the driver's session gets TERM, and KILL after a grace period."""
    steps = list(plugin_of(job).job_kill_steps(job))
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


def application_id(text: str, plugin: ProductPlugin | None = None) -> str:
    """The first application id in the text, as the plugin finds them (every plugin's when
    none is given: YARN's, Spark's), or ""."""
    found = [
        hit
        for p in ([plugin] if plugin else PLUGINS.values())
        if p.application_id is not None and (hit := p.application_id.search(text))
    ]
    return min(found, key=lambda hit: hit.start())[1] if found else ""
