"""Real products for bench/time_to_ready --products: Platter's launch against the raw path and
the stock start-up.

Platter: launch request -> running (containers placed, the catalog's health steps passed) ->
first job done in the master. Raw, in the same run and on the same nodes: the very containers
Platter made (image, command, environment, cores, memory, disks, hosts) started with plain
docker calls in parallel, then the same health steps and the same job run in them directly.
Stock: the raw path again with the images' fast start turned off (PLATTER_FAST_START=0 in
every container, so their start scripts and health checks do what they did before issue 34:
no class-data-sharing archives, spark-class's launcher JVM, Hadoop's default retry waits,
the RM after the format, 1-3 s health polling); the same image, so the comparison is the
start-up changes alone.
"""

import os
import statistics
import time
from pathlib import Path

from django.conf import settings

from bench import plotting
from bench.harness import p95, wait_for
from bench.raw_path import raw_plans, remove_raw, start_plan

# The first job a user would run, in the master instance.
FIRST_JOB = {
    "spark": ["spark-submit", "/opt/spark/examples/src/main/python/pi.py", "2"],
    "hadoop": [
        "sh",
        "-c",
        "hadoop jar /opt/hadoop/share/hadoop/lib/hadoop-mapreduce-examples-*.jar pi 2 100",
    ],
    # A keyspace with 2 replicas, a row written at QUORUM through one node, read through the
    # other (the default shape: a seed and a node).
    "cassandra": ["/opt/platter/bin/cassandra-smoke", "seed-0", "node-0"],
}
# The role whose first instance runs the job ("master" unless named here).
MASTER_ROLE = {"cassandra": "seed"}
JOB_TIMEOUT = 600
# The stock start-up: the same image with the fast start turned off.
STOCK_ENVIRONMENT = {"PLATTER_FAST_START": "0"}
# Aims (issue 34): ready in at most 0.7x the stock start-up, Platter within 1.1x of raw.
AIM_VS_STOCK = 0.7
AIM_VS_RAW = 1.1


def exec_ok(node, container: str, argv: list[str], timeout: float) -> None:
    from apps import nodes

    code, output = nodes.client(node).exec(container, argv, timeout)
    if code != 0:
        raise SystemExit(f"{argv[0]} failed in {container}:\n{output[-1500:]}")


def platter_run(user, version, name: str) -> dict:
    """Seconds to running and to the first job's end, plus what the raw path replays."""
    from apps.clusters import container_specs as containers
    from apps.clusters import services

    started = time.perf_counter()
    cluster = services.launch(user, version, name, {})
    ready = wait_for(cluster.id, "running", seconds=600) - started
    cluster.refresh_from_db()
    product = version.product.name
    master = cluster.instances.select_related("node").get(
        role=MASTER_ROLE.get(product, "master"), index=0, active=True
    )
    exec_ok(master.node, master.container_id, FIRST_JOB[product], JOB_TIMEOUT)
    job = time.perf_counter() - started
    running_at = cluster.running_at
    assert running_at is not None, "a running cluster has its running_at"
    phases = [
        (event.message[:24], (event.at - cluster.created).total_seconds())
        for event in cluster.events.order_by("id")
        if event.at <= running_at
    ]
    plans = containers.plans_for(cluster)
    steps = containers.configure_steps(cluster)
    services.request_destroy(cluster.id, keep_data=False)
    wait_for(cluster.id, "destroyed", seconds=120)
    return {"ready": ready, "job": job, "plans": plans, "steps": steps, "phases": phases}


def raw_run(
    plans,
    steps,
    job: list[str],
    round_no: int,
    kind: str = "raw",
    environment: dict[str, str] | None = None,
    master_role: str = "master",
) -> dict:
    """The same containers with plain docker calls (`environment` added to theirs), then the
    same health steps and `job` in the master; whatever the round made is removed, also when
    it fails. kind="stock" with STOCK_ENVIRONMENT is the stock start-up."""
    from apps.nodes import parallel

    copies = raw_plans(plans, round_no, kind, environment)
    by_name = {plan.name: copy for plan, copy in zip(plans, copies, strict=True)}

    started = time.perf_counter()
    phases = []
    try:
        for outcome in parallel(start_plan, copies):
            if isinstance(outcome, Exception):
                raise outcome
        phases.append(("containers", time.perf_counter() - started))
        for step in steps:
            runs = [(by_name[name], argv) for _instance, name, argv in step.runs]
            outcomes = parallel(
                lambda run, t=step.timeout: exec_ok(run[0].node, run[0].name, run[1], t), runs
            )
            for outcome in outcomes:
                if isinstance(outcome, BaseException):
                    raise outcome
            phases.append((step.description[:24], time.perf_counter() - started))
        ready = time.perf_counter() - started
        master = next((c for c in copies if c.hostname == f"{master_role}-0"), copies[0])
        exec_ok(master.node, master.name, job, JOB_TIMEOUT)
        done = time.perf_counter() - started
    finally:
        remove_raw(copies)
    return {"ready": ready, "job": done, "phases": phases}


def phases_of(run: dict) -> str:
    return ", ".join(f"{name} {at:.1f}" for name, at in run["phases"])


def load_average() -> str:
    return "/".join(f"{n:.1f}" for n in os.getloadavg())


# (title, key of the row, width, format)
COLUMNS = (
    ("product", "product", 9, "s"),
    ("n", "n", 2, "d"),
    ("platter", "ready", 8, ".1f"),
    ("raw", "raw_ready", 6, ".1f"),
    ("stock", "stock_ready", 6, ".1f"),
    ("/raw", "vs_raw", 5, ".2f"),
    ("/stock", "vs_stock", 6, ".2f"),
    ("met", "met", 7, "s"),
    ("job", "job", 6, ".1f"),
    ("raw job", "raw_job", 7, ".1f"),
    ("stock job", "stock_job", 9, ".1f"),
    ("load", "load", 14, "s"),
)


def summarise(product: str, ours: list[dict], raw: list[dict], stock: list[dict]) -> dict:
    """A table row: medians of each path's ready and job seconds, the ratios and the aims."""
    row: dict = {"product": product, "n": len(ours), "load": load_average()}
    for prefix, runs in (("", ours), ("raw_", raw), ("stock_", stock)):
        for key in ("ready", "job"):
            row[prefix + key] = statistics.median(r[key] for r in runs)
    row["ready_p95"] = p95([r["ready"] for r in ours])
    row["vs_raw"] = row["ready"] / row["raw_ready"]
    row["vs_stock"] = row["ready"] / row["stock_ready"]
    met = (row["vs_stock"] <= AIM_VS_STOCK, row["vs_raw"] <= AIM_VS_RAW)
    row["met"] = {(True, True): "both", (True, False): "stock", (False, True): "raw"}.get(met, "NO")
    return row


def header() -> list[str]:
    line = " ".join(f"{title:>{width}}" for title, _key, width, _fmt in COLUMNS)
    return [
        "# medians in seconds from the launch request; ready = health checks passed, job = the"
        " first job done.",
        f"# /raw = platter / raw ready (aim <= {AIM_VS_RAW}), /stock = platter / stock ready"
        f" (aim <= {AIM_VS_STOCK}); met: which aims; load: 1/5/15-minute load average.",
        line,
        "-" * len(line),
    ]


def format_row(row: dict) -> str:
    return " ".join(f"{row[key]:>{width}{fmt}}" for _title, key, width, fmt in COLUMNS)


def bench_products(user, products: list[str], repeat: int, out: Path) -> None:
    from apps.accounts.models import Quota
    from apps.catalog.images import missing_images
    from apps.catalog.models import ProductVersion
    from apps.lab.management.commands.seed_demo import DEMO_QUOTA

    Quota.objects.update_or_create(user=user, defaults=DEMO_QUOTA)  # defaults fit the demo's
    print(f"# {os.cpu_count()} cores; load average {load_average()} at the start", flush=True)
    rows = []
    for product in products:
        version = (
            ProductVersion.objects.filter(product__name=product, enabled=True)
            .exclude(image__in=["mongo:7.0"])
            .order_by("-id")
            .first()
        )
        if version is None or missing_images(version):
            raise SystemExit(f"{product}: no version whose image the lab nodes hold")
        platter_run(user, version, f"{product}-warm-up")  # images in page cache, JIT warm
        job, role = FIRST_JOB[product], MASTER_ROLE.get(product, "master")
        ours, raw, stock = [], [], []
        for n in range(repeat):
            ours.append(platter_run(user, version, f"{product}-{n}"))
            plans, steps = ours[-1]["plans"], ours[-1]["steps"]
            raw.append(raw_run(plans, steps, job, n, master_role=role))
            stock.append(raw_run(plans, steps, job, n, "stock", STOCK_ENVIRONMENT, role))
            for path, run in (("platter", ours[-1]), ("raw", raw[-1]), ("stock", stock[-1])):
                print(
                    f"#   {product} round {n} {path}: ready {run['ready']:.1f}, job"
                    f" {run['job']:.1f}; {phases_of(run)} (load {load_average()})",
                    flush=True,
                )
        rows.append(summarise(product, ours, raw, stock))
    print("\n".join(header() + [format_row(row) for row in rows]), flush=True)
    plot(rows, out / "time_to_ready_products.png")
    print(f"# plot: {out / 'time_to_ready_products.png'}; site {settings.PLATTER_SITE}")


def plot(rows, path: Path) -> None:
    plt = plotting.pyplot()

    x = range(len(rows))
    fig, ax = plt.subplots(figsize=(7, 4))
    width = 0.14
    series = (
        ("stock_ready", "stock start-up: running + health"),
        ("raw_ready", "raw: running + health"),
        ("ready", "Platter: launch to running"),
        ("stock_job", "stock: + first job"),
        ("raw_job", "raw: + first job"),
        ("job", "Platter: + first job"),
    )
    for n, (key, label) in enumerate(series):
        ax.bar([i + (n - 2.5) * width for i in x], [r[key] for r in rows], width, label=label)
    ax.axhline(94, color="k", linestyle="--", label="Dataproc, 3 nodes ready (94 s)")
    ax.set_xticks(list(x), [r["product"] for r in rows])
    ax.set_ylabel("seconds (median)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
