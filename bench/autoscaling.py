"""How long a pending job waits for capacity, with and without an autoscaling policy.

    .venv/bin/python bench/autoscaling [--tasks 30] [--task-seconds 8]

One PySpark job that may use 3 cores (spark.cores.max=3: `--tasks` tasks of `--task-seconds`
each) runs three ways, each on a Spark cluster of its own launched through Platter (a real
Celery worker, a database, Redis database and site label of the bench's own):

- **sized**: the cluster has 3 one-core workers from the start: the capacity is there when the
  job asks, the physical limit of this job on this lab;
- **no policy**: 1 worker, as a user who guessed small: the job never gets its 3 cores;
- **policy**: 1 worker with a policy of 1 to 3 workers at the shortest cooldown the site allows
  (AUTOSCALE_MIN_COOLDOWN_SECONDS); autoscaling's pass runs every AUTOSCALE_SAMPLE_SECONDS, as
  beat runs it.

Timed from the submit: until the job holds 3 cores (its wait for capacity; never, without a
policy) and until it is done. The table gives both and the ratio of each path's run to the
sized one; the plot goes to bench/out/autoscaling.png. Everything the bench made goes again at
the end, also on Ctrl-C.
"""

import argparse
import json
import os
import threading
import time
from dataclasses import dataclass

import django

from bench import harness, plotting
from bench.harness import wait_for

SITE = "bench-autoscaling"
BENCH_DB = "platter_bench_autoscaling"
REDIS_DB = os.environ.get("PLATTER_BENCH_REDIS_DB", "13")
ADDRESS_SLOT = os.environ.get("PLATTER_LAB_ADDRESS_SLOT", "5")
JOB = """import sys, time
from pyspark import SparkContext
tasks, seconds = int(sys.argv[1]), float(sys.argv[2])
sc = SparkContext(appName="bench-autoscaling")
print("done", sc.parallelize(range(tasks), tasks).map(lambda x: (time.sleep(seconds), x)[1]).sum())
"""


@dataclass
class Run:
    path: str  # sized | no policy | policy
    capacity: float | None  # submit -> the job holds 3 cores (None: never)
    done: float  # submit -> done


def granted_cores(master) -> int:
    """The cores the master has granted the running applications."""
    from apps.products.base import admin
    from workers.resize import NodeOperator, member_of

    op = NodeOperator(master.cluster)
    status = admin(op, member_of(master), ["spark-admin", "workers", "--master", master.hostname])
    return sum(w["cores_used"] for w in status if w["state"] == "ALIVE")


def measure(user, version, path: str, args) -> Run:
    from django.conf import settings

    from apps import nodes
    from apps.clusters import autoscale, services
    from workers import autoscale as passes

    size = 3 if path == "sized" else 1
    cluster = services.launch(user, version, f"bench-{path.replace(' ', '-')}", {"size": size})
    try:
        wait_for(cluster.id, "running", seconds=600)
        if path == "policy":
            autoscale.set_policy(cluster.id, {"min_workers": 1, "max_workers": 3})
        master = cluster.instances.select_related("node", "cluster").get(role="master", active=True)
        assert master.node is not None, "placed"
        client = nodes.client(master.node)
        client.put_files(master.container_id, "/tmp", {"bench.py": JOB.encode()})  # noqa: S108
        argv = ["spark-submit", "--driver-memory", "512m", "--executor-memory", "512m"]
        argv += ["--conf", "spark.cores.max=3"]
        argv += ["/tmp/bench.py", str(args.tasks), str(args.task_seconds)]  # noqa: S108
        ended: dict = {}

        def job() -> None:
            ended["result"] = client.exec(master.container_id, argv, 3600)
            ended["at"] = time.perf_counter()

        started = time.perf_counter()
        running = threading.Thread(target=job)
        running.start()
        capacity, last_pass = None, 0.0
        every = settings.AUTOSCALE_SAMPLE_SECONDS
        while running.is_alive():
            if path == "policy" and time.monotonic() - last_pass >= every:
                passes.run_pass()
                last_pass = time.monotonic()
            if capacity is None and granted_cores(master) >= 3:
                capacity = time.perf_counter() - started
            running.join(timeout=2)
        code, output = ended["result"]
        if code != 0 or "done" not in output:
            raise SystemExit(f"the job on {path} failed:\n{output[-2000:]}")
        return Run(path, capacity, ended["at"] - started)
    finally:
        services.request_destroy(cluster.id, keep_data=False)
        wait_for(cluster.id, "destroyed", seconds=300)


def table(runs: list[Run]) -> str:
    sized = next(r.done for r in runs if r.path == "sized")
    lines = [f"{'path':10} {'submit -> 3 cores':>18} {'submit -> done':>15} {'x sized':>8}"]
    for run in runs:
        waited = "never" if run.capacity is None else f"{run.capacity:.1f} s"
        lines.append(f"{run.path:10} {waited:>18} {run.done:13.1f} s {run.done / sized:8.2f}")
    return "\n".join(lines)


def plot(runs: list[Run], path) -> None:
    plt = plotting.pyplot()
    fig, axis = plt.subplots(figsize=(6, 4))
    names = [r.path for r in runs]
    axis.bar(names, [r.done for r in runs], color="tab:green", label="submit -> done")
    axis.bar(
        names,
        [r.capacity or 0 for r in runs],
        color="tab:orange",
        width=0.4,
        label="submit -> 3 cores",
    )
    axis.set_ylabel("seconds")
    axis.set_title("A job asking for 3 cores on a 1-core Spark cluster")
    axis.legend()
    fig.tight_layout()
    fig.savefig(path)


def bench(args) -> list[Run]:
    version = harness.lab_version("spark")
    user = harness.bench_user()
    runs = []
    for path in ("sized", "no policy", "policy"):
        runs.append(measure(user, version, path, args))
        print(f"# {path}: done in {runs[-1].done:.1f} s", flush=True)
    return runs


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=30, help="tasks of the job")
    parser.add_argument("--task-seconds", type=float, default=8, help="seconds each task sleeps")
    args = parser.parse_args(argv)
    plotting.require()  # before minutes of measuring, not after them

    harness.isolate(SITE, REDIS_DB, ADDRESS_SLOT)
    out = plotting.out_dir()
    log = out / "autoscaling-worker.log"
    with harness.own_database(BENCH_DB), harness.celery_worker(BENCH_DB, log):
        django.setup()
        harness.prepare(str(log))
        runs = bench(args)
    shape = f"{args.tasks} tasks of {args.task_seconds:g} s, spark.cores.max=3"
    print(f"# {shape}; {os.cpu_count()} cores")
    print(table(runs))
    plot(runs, out / "autoscaling.png")
    print(f"# plot: {out / 'autoscaling.png'}")
    print(json.dumps([vars(r) for r in runs]))


if __name__ == "__main__":
    main()
