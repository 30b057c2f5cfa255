"""Volume coupling on the lab (Figure 5 of ../shared/papers/cesga-bigdata-paas.txt).

    .venv/bin/python bench/coupling [--cap-mb 20] [--runtime 3] [--node lab-2]

One container with 4 volumes on one lab node. At coupling 1 each volume is its own disk (what
Platter does), at 2 two volumes share a disk, at 4 all four share one (several volume folders
on one disk, as an OpenStack/LVM layout ends up). Every disk is capped to the same bandwidth with
blkio throttles to emulate a spindle (the lab's loop devices all sit on one real disk); a
throttle is per container per device, so volumes on one disk share one cap, like on a real
spindle. fio runs sequential 1 MiB write and read and random 4 KiB write and read (queue depth
16) in all volumes at once; the table gives mean, min and max per volume and what the cap
predicts (cap / coupling). Then the container overhead: the same fio jobs on one uncapped disk
from a container and directly on the host, alternately (aim: container >= 0.95 of host).
Needs the lab (./platter lab up) and no database. Writes bench/out/coupling.png.
"""

import argparse
import os
import shutil
import statistics
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

import django  # noqa: E402

django.setup()

from django.conf import settings  # noqa: E402

from apps.inventory.benchmarks import parse_fio  # noqa: E402
from apps.lab import host  # noqa: E402
from apps.lab.daemons import local_endpoint  # noqa: E402
from apps.lab.nodes import disk_kind, lab_nodes  # noqa: E402
from apps.nodes.engine import connect  # noqa: E402
from bench import plotting  # noqa: E402

SITE = "bench-coupling"
VOLUMES = 4
LAYOUTS = (1, 2, 4)
# (phase, fio options, unit): MB/s for sequential, IOPS for random.
PHASES = (
    ("seq write", "--rw=write --bs=1M --iodepth=1", "MB/s"),
    ("seq read", "--rw=read --bs=1M --iodepth=1", "MB/s"),
    ("rand write", "--rw=randwrite --bs=4k --iodepth=16", "IOPS"),
    ("rand read", "--rw=randread --bs=4k --iodepth=16", "IOPS"),
)
# Reads get files fio lays out with real data (see apps/inventory/benchmarks.py).
FILE_MB = 48


def fio_argv(folders: list[str], runtime: int, phases=PHASES) -> list[str]:
    """One fio run: each phase in every folder at once, phases one after the other."""
    argv = [
        "--output-format=json",
        "--ioengine=libaio",
        "--direct=1",
        "--time_based",
        f"--runtime={runtime}",
        f"--size={FILE_MB}M",
        "--randrepeat=0",
    ]
    for phase, options, _ in phases:
        for n, folder in enumerate(folders):
            argv += [
                f"--name={phase}|{n}",
                f"--directory={folder}",
                f"--filename={'read' if 'read' in phase else 'write'}.fio",
                *options.split(),
            ]
            if n == 0:
                argv.append("--stonewall")  # the phase starts when the previous one ended
    return argv


def per_phase(output: str) -> dict[str, list[float]]:
    """Per phase, each volume's MB/s (sequential) or IOPS (random), in volume order."""
    values: dict[str, list[float]] = {}
    for job in parse_fio(output):
        phase, _ = job.name.split("|")
        unit = next(u for p, _, u in PHASES if p == phase)
        if unit == "MB/s":
            value = job.read_mbps if "read" in phase else job.write_mbps
        else:
            value = job.read_iops if "read" in phase else job.write_iops
        values.setdefault(phase, []).append(value)
    return values


def run_container(client, binds: list[str], argv: list[str], throttles: dict) -> str:
    api = client.api
    host_config = api.create_host_config(binds=binds, network_mode="none", **throttles)
    container = api.create_container(
        settings.LAB_FIO_IMAGE,
        argv,
        entrypoint=["fio"],
        host_config=host_config,
        labels={"platter.site": SITE},
        name=f"{SITE}-{os.getpid()}",
    )
    try:
        api.start(container["Id"])
        code = api.wait(container["Id"])["StatusCode"]
        output = api.logs(container["Id"], stdout=True, stderr=False).decode()
        if code != 0:
            raise SystemExit(f"fio failed in the container: {api.logs(container['Id'])[-500:]}")
        return output
    finally:
        api.remove_container(container["Id"], force=True)


def coupling_run(client, disks, cap: int, runtime: int) -> dict[int, dict[str, list[float]]]:
    results = {}
    for coupling in LAYOUTS:
        # volume n lives on disk n // coupling: 4 disks, then 2, then 1
        used = [disks[n // coupling] for n in range(VOLUMES)]
        binds = []
        for n, (mount, _) in enumerate(used):
            folder = mount / SITE / f"c{coupling}-v{n}"
            folder.mkdir(parents=True, exist_ok=True)
            binds.append(f"{folder}:/data/{n}")
        devices = sorted({device for _, device in used})
        throttles = {
            key: [{"Path": device, "Rate": cap} for device in devices]
            for key in ("device_read_bps", "device_write_bps")
        }
        argv = fio_argv([f"/data/{n}" for n in range(VOLUMES)], runtime)
        results[coupling] = per_phase(run_container(client, binds, argv, throttles))
    return results


def overhead_run(client, disk, runtime: int, repeat: int) -> dict[str, tuple[float, float]]:
    """Median container and host figures per phase on one uncapped disk."""
    mount, _ = disk
    folder = mount / SITE / "overhead"
    folder.mkdir(parents=True, exist_ok=True)
    container: dict[str, list[float]] = {}
    on_host: dict[str, list[float]] = {}
    for _ in range(repeat):
        for phase in PHASES:
            argv = fio_argv(["/data/0"], runtime, [phase])
            for target, values in ((True, container), (False, on_host)):
                if target:
                    output = run_container(client, [f"{folder}:/data/0"], argv, {})
                else:
                    host_argv = fio_argv([str(folder)], runtime, [phase])
                    output = subprocess.run(
                        ["fio", *host_argv], capture_output=True, text=True, check=True
                    ).stdout
                values.setdefault(phase[0], []).extend(per_phase(output)[phase[0]])
    return {
        phase: (statistics.median(container[phase]), statistics.median(on_host[phase]))
        for phase, _, _ in PHASES
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--node", help="lab node (default: the first that answers)")
    parser.add_argument("--cap-mb", type=int, default=20, help="MB/s cap of every disk")
    parser.add_argument("--runtime", type=int, default=3, help="seconds per fio phase")
    parser.add_argument("--repeat", type=int, default=3, help="container/host alternations")
    args = parser.parse_args(argv)
    plotting.require()  # before minutes of measuring, not after them

    node = next((n for n in lab_nodes() if n.name == args.node or (not args.node and up(n))), None)
    if node is None:
        raise SystemExit(f"no lab node {args.node or 'answers'}: ./platter lab up")
    disks = []
    for index in range(1, settings.LAB_DISKS_PER_NODE + 1):
        mount = node.disk_paths(index)[1]
        device = host.mounted_device(mount)
        if device is None:
            raise SystemExit("the lab is not running: start it with ./platter lab up")
        disks.append((mount, device, disk_kind(index)))
    hdds = [(m, d) for m, d, kind in disks if kind == "hdd"][:VOLUMES]
    if len(hdds) < VOLUMES:
        raise SystemExit(f"coupling 1 needs {VOLUMES} HDDs on {node.name}")
    client = connect(local_endpoint(node).endpoint, timeout=600)
    cap = args.cap_mb * 1_000_000
    out = plotting.out_dir()
    try:
        results = coupling_run(client, hdds, cap, args.runtime)
        overhead = overhead_run(client, hdds[0], args.runtime, args.repeat)
    finally:
        for mount, _ in hdds:
            shutil.rmtree(mount / SITE, ignore_errors=True)
    report(results, overhead, args, node.name)
    plot(results, args.cap_mb, out / "coupling.png")
    print(f"# plot: {out / 'coupling.png'}")


def up(node) -> bool:
    try:
        return connect(local_endpoint(node).endpoint, timeout=5).ping()
    except Exception:  # noqa: BLE001 (a node another run stopped is simply skipped)
        return False


def expected(unit: str, cap_mb: int, coupling: int) -> float:
    per_disk = cap_mb if unit == "MB/s" else cap_mb * 1_000_000 / 4096
    return per_disk / coupling


def report(results, overhead, args, node: str) -> None:
    print(
        f"# {node}: {VOLUMES} volumes in one container, every disk capped at {args.cap_mb} MB/s"
        f" (blkio), {args.runtime} s per phase, {os.cpu_count()} cores"
    )
    header = (
        f"{'test':<10} {'coupling':>8} {'unit':>5} {'mean':>8} {'min':>8} {'max':>8}"
        f" {'expected':>8} {'mean/exp':>8} {'vs c=1':>6}"
    )
    print(header)
    print("-" * len(header))
    for phase, _, unit in PHASES:
        base = statistics.mean(results[1][phase])
        for coupling in LAYOUTS:
            values = results[coupling][phase]
            mean, exp = statistics.mean(values), expected(unit, args.cap_mb, coupling)
            print(
                f"{phase:<10} {coupling:>8} {unit:>5} {mean:>8.1f} {min(values):>8.1f}"
                f" {max(values):>8.1f} {exp:>8.1f} {mean / exp:>8.2f} {mean / base:>6.2f}"
            )
    print()
    print("# container overhead: one uncapped disk, medians of", args.repeat, "alternations")
    header = f"{'test':<10} {'unit':>5} {'container':>10} {'host':>10} {'ratio':>6} {'met':>4}"
    print(header)
    print("-" * len(header))
    for phase, _, unit in PHASES:
        inside, outside = overhead[phase]
        ratio = inside / outside
        print(
            f"{phase:<10} {unit:>5} {inside:>10.1f} {outside:>10.1f} {ratio:>6.2f}"
            f" {'yes' if ratio >= 0.95 else 'NO':>4}"
        )


def plot(results, cap_mb: int, path: Path) -> None:
    plt = plotting.pyplot()

    fig, axes = plt.subplots(1, len(PHASES), figsize=(12, 3.5))
    for ax, (phase, _, unit) in zip(axes, PHASES, strict=True):
        means = [statistics.mean(results[c][phase]) for c in LAYOUTS]
        low = [m - min(results[c][phase]) for m, c in zip(means, LAYOUTS, strict=True)]
        high = [max(results[c][phase]) - m for m, c in zip(means, LAYOUTS, strict=True)]
        x = range(len(LAYOUTS))
        ax.bar(x, means, yerr=[low, high], capsize=4, color=["tab:green", "tab:orange", "tab:red"])
        ax.plot(x, [expected(unit, cap_mb, c) for c in LAYOUTS], "k--", label="cap / coupling")
        ax.set_xticks(list(x), [f"c={c}" for c in LAYOUTS])
        ax.set_title(phase)
        ax.set_ylabel(f"{unit} per volume")
    axes[0].legend()
    fig.suptitle("Per-volume performance vs volume coupling (c=1 is Platter)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    main()
