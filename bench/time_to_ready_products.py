"""Real products for bench/time_to_ready --products: Platter's launch against the raw path.

Platter: launch request -> running (containers placed, the catalog's health steps passed) ->
first job done in the master. Raw, in the same run and on the same nodes: the very containers
Platter made (image, command, environment, cores, memory, disks, hosts) started with plain
docker calls in parallel, then the same health steps and the same job run in them directly.
"""

import statistics
import time
from pathlib import Path

from django.conf import settings
from time_to_ready import p95, raw_plans, remove_raw, start_plan, wait_for

# The first job a user would run, in the master instance.
FIRST_JOB = {
    "spark": ["spark-submit", "/opt/spark/examples/src/main/python/pi.py", "2"],
    "hadoop": [
        "sh",
        "-c",
        "hadoop jar /opt/hadoop/share/hadoop/lib/hadoop-mapreduce-examples-*.jar pi 2 100",
    ],
}
JOB_TIMEOUT = 600


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
    master = cluster.instances.select_related("node").get(role="master", active=True)
    exec_ok(master.node, master.container_id, FIRST_JOB[version.product.name], JOB_TIMEOUT)
    job = time.perf_counter() - started
    phases = [
        (event.message[:24], (event.at - cluster.created).total_seconds())
        for event in cluster.events.order_by("id")
        if event.at <= cluster.running_at
    ]
    plans = containers.plans_for(cluster)
    steps = containers.configure_steps(cluster)
    services.request_destroy(cluster.id, keep_data=False)
    wait_for(cluster.id, "destroyed", seconds=120)
    return {"ready": ready, "job": job, "plans": plans, "steps": steps, "phases": phases}


def raw_run(plans, steps, job: list[str], round_no: int) -> dict:
    """The same containers with plain docker calls, then the same health steps and `job` in
    the master; whatever the round made is removed, also when it fails."""
    from apps.nodes import parallel

    copies = raw_plans(plans, round_no)
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
        master = next((c for c in copies if c.hostname.startswith("master-")), copies[0])
        exec_ok(master.node, master.name, job, JOB_TIMEOUT)
        done = time.perf_counter() - started
    finally:
        remove_raw(copies)
    return {"ready": ready, "job": done, "phases": phases}


def phases_of(run: dict) -> str:
    return ", ".join(f"{name} {at:.1f}" for name, at in run["phases"])


def bench_products(user, products: list[str], repeat: int, out: Path) -> None:
    from apps.accounts.models import Quota
    from apps.catalog.images import missing_images
    from apps.catalog.models import ProductVersion
    from apps.lab.management.commands.seed_demo import DEMO_QUOTA

    Quota.objects.update_or_create(user=user, defaults=DEMO_QUOTA)  # defaults fit the demo's
    header = (
        f"{'product':<8} {'n':>2} {'platter ready':>13} {'raw ready':>9} {'ratio':>6}"
        f" {'platter job':>11} {'raw job':>8} {'ratio':>6}"
    )
    print("# medians in seconds; ready = health passed, job = first job done (from launch)")
    print(header)
    print("-" * len(header))
    rows = []
    for product in products:
        version = (
            ProductVersion.objects.filter(product__name=product, enabled=True)
            .order_by("-id")
            .first()
        )
        if version is None or missing_images(version):
            raise SystemExit(f"{product}: no version whose image the lab nodes hold")
        platter_run(user, version, f"{product}-warm-up")  # images in page cache, JIT warm
        ours, raw = [], []
        for n in range(repeat):
            ours.append(platter_run(user, version, f"{product}-{n}"))
            raw.append(raw_run(ours[-1]["plans"], ours[-1]["steps"], FIRST_JOB[product], n))
            print(
                f"#   {product} round {n}: platter {phases_of(ours[-1])}; raw "
                + ", ".join(f"{name} {at:.1f}" for name, at in raw[-1]["phases"]),
                flush=True,
            )
        row = {
            key: statistics.median(r[k] for r in runs)
            for key, runs, k in (
                ("ready", ours, "ready"),
                ("raw_ready", raw, "ready"),
                ("job", ours, "job"),
                ("raw_job", raw, "job"),
            )
        }
        row["ready_p95"] = p95([r["ready"] for r in ours])
        rows.append((product, row))
        print(
            f"{product:<8} {repeat:>2} {row['ready']:>13.1f} {row['raw_ready']:>9.1f}"
            f" {row['ready'] / row['raw_ready']:>6.2f} {row['job']:>11.1f}"
            f" {row['raw_job']:>8.1f} {row['job'] / row['raw_job']:>6.2f}",
            flush=True,
        )
    plot(rows, out / "time_to_ready_products.png")
    print(f"# plot: {out / 'time_to_ready_products.png'}; site {settings.PLATTER_SITE}")


def plot(rows, path: Path) -> None:
    from plotting import pyplot

    plt = pyplot()

    x = range(len(rows))
    fig, ax = plt.subplots(figsize=(6, 4))
    width = 0.2
    series = (
        ("raw_ready", "raw: running + health"),
        ("ready", "Platter: launch to running"),
        ("raw_job", "raw: + first job"),
        ("job", "Platter: + first job"),
    )
    for n, (key, label) in enumerate(series):
        ax.bar([i + (n - 1.5) * width for i in x], [r[1][key] for r in rows], width, label=label)
    ax.axhline(94, color="k", linestyle="--", label="Dataproc, 3 nodes ready (94 s)")
    ax.set_xticks(list(x), [r[0] for r in rows])
    ax.set_ylabel("seconds (median)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
