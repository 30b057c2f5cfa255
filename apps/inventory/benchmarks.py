"""Disk benchmarks with fio, one disk at a time, in a short-lived container per disk.

The jobs are those of Table 4 of the CESGA paper (../shared/papers/cesga-bigdata-paas.txt):
sequential 1 MiB write and read of a 1 GiB file, random 4 KiB write and read of a 256 MiB file
at queue depth 1 and 64, with direct I/O so the page cache does not answer for the disk. File
sizes are divided by BENCH_SIZE_DIVISOR and every job runs BENCH_RUNTIME_S seconds. The
container binds only the disk's folder and gets the disk's blkio caps, like an instance would.
"""

import json
import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from django.conf import settings

from apps import nodes
from apps.inventory import services
from apps.inventory.models import Disk, Node
from apps.nodes import NodeError, helpers
from apps.nodes.specs import throttle_options
from portal import locks

log = logging.getLogger(__name__)

MIB = 1024 * 1024
# (job name, Disk field, fio options); jobs run one after the other (stonewall). Reads get
# files of their own that fio lays out with real data: a file a write job fallocated has
# unwritten extents wherever the timed write did not reach, and reading those is free.
JOBS = (
    ("seq-write", "seq_write_mbps", "--rw=write --bs=1M --iodepth=1 --unlink=1"),
    ("seq-read", "seq_read_mbps", "--rw=read --bs=1M --iodepth=1 --unlink=1"),
    ("rand-write-qd1", "rand_write_iops_qd1", "--rw=randwrite --bs=4k --iodepth=1"),
    ("rand-read-qd1", "rand_read_iops_qd1", "--rw=randread --bs=4k --iodepth=1"),
    ("rand-write-qd64", "rand_write_iops_qd64", "--rw=randwrite --bs=4k --iodepth=64 --unlink=1"),
    ("rand-read-qd64", "rand_read_iops_qd64", "--rw=randread --bs=4k --iodepth=64 --unlink=1"),
)


@dataclass(frozen=True)
class JobResult:
    name: str
    read_mbps: float  # MB/s (10^6 bytes)
    write_mbps: float
    read_iops: float
    write_iops: float


@dataclass
class BenchReport:
    measured: dict[str, dict[str, float]] = field(default_factory=dict)  # mount path -> fields
    skipped: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    flagged: int = 0


class FioOutputError(ValueError):
    """fio's output had no JSON report, or a job reported an error."""


def parse_fio(output: str) -> list[JobResult]:
    """The jobs of fio's `--output-format=json` report. fio may print warnings before the
    JSON (container logs mix stderr in), so decoding starts at the first '{'."""
    start = output.find("{")
    if start < 0:
        raise FioOutputError(f"no JSON in fio's output: {output.strip()[-300:]!r}")
    try:
        report, _ = json.JSONDecoder().raw_decode(output[start:])
    except json.JSONDecodeError as error:
        raise FioOutputError(f"fio's JSON does not parse: {error}") from error
    results = []
    for job in report.get("jobs", []):
        if job.get("error"):
            raise FioOutputError(f"fio job {job.get('jobname')} failed: error {job['error']}")
        read, write = job.get("read", {}), job.get("write", {})
        results.append(
            JobResult(
                name=job.get("jobname", ""),
                read_mbps=_bytes_per_second(read) / 1e6,
                write_mbps=_bytes_per_second(write) / 1e6,
                read_iops=float(read.get("iops", 0.0)),
                write_iops=float(write.get("iops", 0.0)),
            )
        )
    return results


def _bytes_per_second(side: dict) -> float:
    if "bw_bytes" in side:
        return float(side["bw_bytes"])
    return float(side.get("bw", 0)) * 1024  # older fio: KiB/s only


def disk_fields(results: list[JobResult]) -> dict[str, float]:
    """fio job results as Disk benchmark fields (MB/s for sequential, IOPS for random)."""
    by_name = {result.name: result for result in results}
    fields = {}
    for name, disk_field, _ in JOBS:
        result = by_name.get(name)
        if result is None:
            continue
        reading = "read" in name
        if disk_field.endswith("_mbps"):
            fields[disk_field] = result.read_mbps if reading else result.write_mbps
        else:
            fields[disk_field] = result.read_iops if reading else result.write_iops
    return fields


def fio_arguments(directory: str, ioengine: str, size_divisor: int, runtime_s: int) -> list[str]:
    """fio's argv (without the program name) for the Table 4 jobs on one folder."""
    seq_size = max(1, 1024 // size_divisor)
    rand_size = max(1, 256 // size_divisor)
    argv = [
        "--output-format=json",
        f"--directory={directory}",
        f"--ioengine={ioengine}",
        "--direct=1",
        "--time_based",
        f"--runtime={runtime_s}",
        "--randrepeat=0",
    ]
    for name, _, options in JOBS:
        seq = name.startswith("seq")
        argv += [
            f"--name={name}",
            "--stonewall",
            f"--filename=.platter-bench-{name.split('-qd')[0]}",
            f"--size={seq_size if seq else rand_size}M",
            *options.split(),
        ]
    return argv


def bench_disk(disk: Disk) -> dict[str, float]:
    """Run the jobs on one disk of its node (blocking, tens of seconds); the Disk fields."""
    node = disk.node
    engine = settings.BENCH_IOENGINE
    while True:
        argv = fio_arguments("/disk", engine, settings.BENCH_SIZE_DIVISOR, settings.BENCH_RUNTIME_S)
        code, output = nodes.client(node).run_helper(
            argv,
            [f"{disk.mount_path}:/disk"],
            image=settings.BENCH_IMAGE,
            entrypoint=["fio"],
            host_options=throttle_options([disk]),
            # bench_node holds the node's benchmark lock while this runs (minutes).
            labels=helpers.serving("bench", locks.BENCHMARK, node.id, disk=disk.id),
        )
        if code != 0 and engine != "psync" and f"engine {engine} not loadable" in output:
            log.warning("node %s: fio has no %s; using psync", node.name, engine)
            engine = "psync"  # queue depth 64 then behaves like 1
            continue
        if code != 0:
            raise NodeError(node.name, f"fio failed on {disk.mount_path}: {output[-300:]}", False)
        try:
            return disk_fields(parse_fio(output))
        except FioOutputError as error:
            raise NodeError(node.name, f"{disk.mount_path}: {error}", False) from error


def bench_node(
    node: Node, set_kind: bool = False, say: Callable[[str], None] = log.info
) -> BenchReport:
    """Benchmark the node's disks one at a time (they may share a controller or, in the lab,
    one real disk); only disks nobody holds, since the jobs write to them."""
    report = BenchReport()
    with _benchmarking(node):
        for disk in node.disks.select_related("node").order_by("mount_path"):
            # Out of the pool first: the scheduler must not give a disk fio writes to.
            taken = Disk.objects.filter(id=disk.id, state=Disk.State.AVAILABLE).update(
                state=Disk.State.BENCHMARKING
            )
            if not taken:
                report.skipped.append(disk.mount_path)
                continue
            try:
                results = bench_disk(disk)
            except NodeError as error:
                report.failed[disk.mount_path] = error.message
                say(f"{node.name}:{disk.mount_path}: {error.message}")
                continue
            finally:
                Disk.objects.filter(id=disk.id, state=Disk.State.BENCHMARKING).update(
                    state=Disk.State.AVAILABLE
                )
            _record(node, disk, results, set_kind, report, say)
    report.flagged = services.refresh_slow_flags()
    return report


@contextmanager
def _benchmarking(node: Node) -> Iterator[None]:
    """One benchmark per node at a time (an advisory lock on the node, tied to the database
    session, so a killed worker never leaves it held). Under it, a disk still marked
    benchmarking was left so by a worker that died mid-run: it goes back to the pool."""
    with locks.advisory_lock(locks.BENCHMARK, node.id) as got:
        if not got:
            raise NodeError(node.name, "another disk benchmark runs on this node")
        Disk.objects.filter(node=node, state=Disk.State.BENCHMARKING).update(
            state=Disk.State.AVAILABLE
        )
        yield


def _record(node, disk, results, set_kind, report, say) -> None:
    services.record_benchmark(disk.id, results, set_kind)
    report.measured[disk.mount_path] = results
    say(f"{node.name}:{disk.mount_path}: {format_results(results)}")


def format_results(results: dict[str, float]) -> str:
    return ", ".join(f"{services.BENCH_LABELS[k]} {v:.0f}" for k, v in results.items())
