"""A job through Platter against `spark-submit` run by hand, on one Spark cluster, in one run.

    .venv/bin/python bench/jobs [--rounds 5]

Platter launches a Spark cluster itself (the catalog's default shape), through
apps.clusters.services and a real Celery worker, in a database, Redis database and site label
of the bench's own. Then, round after round, a small PySpark job (a sum over 2 partitions)
runs both ways on it:

- **platter**: apps.jobs.services.submit with the program uploaded, as the API does; the job's
  own worker copies it into the master container, starts spark-submit there and follows its
  log. Timed as a user sees it in the job's row: submit -> driver running (the application id
  is in the job: the driver registered with the master) and submit -> done (succeeded).
- **raw**: the same program, put in the master container once before the round, started with
  one `docker exec` of the same spark-submit command line, its output read as it comes: exec
  start -> the application id printed, and -> the exec's end.

Aim (issue 30): Platter's submit -> done within 1.2x the raw path + 1 s. The table gives
medians and p95s per path and the ratio; the plot goes to bench/out/jobs.png. Everything the
bench made (cluster, worker, database) goes again at the end, also on Ctrl-C.
"""

import argparse
import os
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

import django

from bench import harness, plotting
from bench.harness import p95, wait_for

SITE = "bench-jobs"
BENCH_DB = "platter_bench_jobs"
REDIS_DB = os.environ.get("PLATTER_BENCH_REDIS_DB", "14")
ADDRESS_SLOT = os.environ.get("PLATTER_LAB_ADDRESS_SLOT", "4")
AIM_RATIO, AIM_SECONDS = 1.2, 1.0
PROGRAM = b"""import sys
from pyspark.sql import SparkSession
spark = SparkSession.builder.getOrCreate()
print("sum", spark.sparkContext.parallelize(range(1000), 2).sum())
spark.stop()
"""
ANSWER = "sum 499500"
RAW_FOLDER = "/tmp/platter-bench-jobs"  # noqa: S108 (in the cluster's master container)
JOB_SECONDS = 300


@dataclass
class Round:
    path: str  # platter | raw
    running: float  # submit -> driver running
    done: float  # submit -> done


def platter_round(user, cluster) -> Round:
    from apps.jobs import services
    from apps.jobs.models import Job, JobFile
    from apps.jobs.services import JobRequest, Upload

    asked = JobRequest(kind="pyspark", uploads=[Upload(JobFile.Role.MAIN, "sum.py", PROGRAM)])
    started = time.perf_counter()
    job = services.submit(user, cluster, asked)
    running = 0.0
    deadline = time.monotonic() + JOB_SECONDS
    while time.monotonic() < deadline:
        state, application = Job.objects.filter(id=job.id).values_list("state", "application_id")[0]
        if application and not running:
            running = time.perf_counter() - started
        if state in ("succeeded", "failed", "killed"):
            done = time.perf_counter() - started
            log = Job.objects.get(id=job.id).log
            if state != "succeeded" or ANSWER not in log:
                raise SystemExit(f"job {job.id} ended {state}:\n{log[-2000:]}")
            return Round("platter", running or done, done)
        time.sleep(0.01)
    raise SystemExit(f"job {job.id} did not end in {JOB_SECONDS} s")


def raw_round(master) -> Round:
    """spark-submit by hand: one exec, its output streamed, the same command line the job
    runs (apps.jobs.commands.program) but for the job's name."""
    from apps.jobs.commands import APPLICATION_ID
    from apps.nodes import engine

    container = engine.cached(master.node).containers.get(master.container_id)
    argv = ["spark-submit", "--deploy-mode", "client", "--name", "bench-raw", "sum.py"]
    started = time.perf_counter()
    running, output = 0.0, ""
    result = container.exec_run(
        argv, workdir=RAW_FOLDER, environment={"PYTHONUNBUFFERED": "1"}, stream=True
    )
    for chunk in result.output:
        assert isinstance(chunk, bytes), "a streamed exec yields its output in chunks"
        output += chunk.decode(errors="replace")
        if not running and APPLICATION_ID.search(output):
            running = time.perf_counter() - started
    done = time.perf_counter() - started
    if ANSWER not in output:
        raise SystemExit(f"the raw spark-submit did not print {ANSWER!r}:\n{output[-2000:]}")
    return Round("raw", running or done, done)


def put_program(master) -> None:
    from apps import nodes

    nodes.client(master.node).put_files(master.container_id, RAW_FOLDER, {"sum.py": PROGRAM})


def median_p95(values: list[float]) -> tuple[float, float]:
    return statistics.median(values), p95(values)


def table(rounds: list[Round]) -> str:
    lines = [f"{'path':8} {'n':>3} {'running med':>12} {'p95':>7} {'done med':>9} {'p95':>7}"]
    done = {}
    for path in ("raw", "platter"):
        mine = [r for r in rounds if r.path == path]
        run_med, run_p95 = median_p95([r.running for r in mine])
        done_med, done_p95 = median_p95([r.done for r in mine])
        done[path] = done_med
        lines.append(
            f"{path:8} {len(mine):3} {run_med:12.2f} {run_p95:7.2f} {done_med:9.2f} {done_p95:7.2f}"
        )
    limit = AIM_RATIO * done["raw"] + AIM_SECONDS
    verdict = "met" if done["platter"] <= limit else "NOT met"
    lines.append(
        f"# submit -> done: Platter {done['platter']:.2f} s = {done['platter'] / done['raw']:.2f}x"
        f" raw {done['raw']:.2f} s (+{done['platter'] - done['raw']:.2f} s); aim <= "
        f"{AIM_RATIO}x + {AIM_SECONDS:.0f} s = {limit:.2f} s: {verdict}"
    )
    return "\n".join(lines)


def plot(rounds: list[Round], path: Path) -> None:
    plt = plotting.pyplot()
    fig, axis = plt.subplots(figsize=(6, 4))
    for offset, (name, color) in enumerate((("raw", "tab:gray"), ("platter", "tab:green"))):
        mine = [r for r in rounds if r.path == name]
        meds = [statistics.median(r.running for r in mine), statistics.median(r.done for r in mine)]
        axis.bar([x + offset * 0.4 for x in (0, 1)], meds, width=0.4, color=color, label=name)
    axis.set_xticks([0.2, 1.2], ["submit -> driver running", "submit -> done"])
    axis.set_ylabel("seconds (median)")
    axis.set_title("A small PySpark job: Platter's jobs against spark-submit by hand")
    axis.legend()
    fig.tight_layout()
    fig.savefig(path)


def bench(args) -> list[Round]:
    from apps.clusters import services

    version = harness.lab_version("spark")
    user = harness.bench_user()
    cluster = services.launch(user, version, "bench-jobs", {})
    try:
        wait_for(cluster.id, "running", seconds=600)
        master = cluster.instances.select_related("node").get(role="master", active=True)
        put_program(master)
        raw_round(master)  # warm-up: the JVM's and Python's files in the page cache, both ways
        platter_round(user, cluster)
        rounds = []
        for number in range(args.rounds):
            rounds += [raw_round(master), platter_round(user, cluster)]
            print(
                f"# round {number + 1}: raw {rounds[-2].done:.2f} s, platter "
                f"{rounds[-1].done:.2f} s",
                flush=True,
            )
        return rounds
    finally:
        services.request_destroy(cluster.id, keep_data=False)
        wait_for(cluster.id, "destroyed", seconds=180)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="jobs per path")
    args = parser.parse_args(argv)
    plotting.require()  # before minutes of measuring, not after them

    harness.isolate(SITE, REDIS_DB, ADDRESS_SLOT)
    out = plotting.out_dir()
    log = out / "jobs-worker.log"
    with harness.own_database(BENCH_DB), harness.celery_worker(BENCH_DB, log):
        django.setup()
        harness.prepare(str(log))
        rounds = bench(args)
    print(f"# a PySpark sum over 2 partitions, {args.rounds} rounds a path, {os.cpu_count()} cores")
    print(table(rounds))
    plot(rounds, out / "jobs.png")
    print(f"# plot: {out / 'jobs.png'}")


if __name__ == "__main__":
    main()
