"""Disk benchmarks: reading fio's JSON report, and a real (tiny) fio run on a lab disk."""

import json
from pathlib import Path

import pytest
from django.core.management import call_command

from apps.inventory.benchmarks import (
    JOBS,
    FioOutputError,
    JobResult,
    bench_disk,
    disk_fields,
    fio_arguments,
    parse_fio,
)
from apps.inventory.models import Disk


def fio_job(name: str, read: tuple[int, float] = (0, 0.0), write: tuple[int, float] = (0, 0.0)):
    """A job as fio 3.x reports it (bandwidth in KiB/s and bytes/s, IOPS), trimmed."""
    return {
        "jobname": name,
        "error": 0,
        "read": {"io_bytes": 1, "bw_bytes": read[0], "bw": read[0] // 1024, "iops": read[1]},
        "write": {"io_bytes": 1, "bw_bytes": write[0], "bw": write[0] // 1024, "iops": write[1]},
    }


REPORT = {
    "fio version": "fio-3.33",
    "jobs": [
        fio_job("seq-write", write=(150_000_000, 143.05)),
        fio_job("seq-read", read=(180_000_000, 171.66)),
        fio_job("rand-write-qd1", write=(1_228_800, 300.0)),
        fio_job("rand-read-qd1", read=(819_200, 200.0)),
        fio_job("rand-write-qd64", write=(2_048_000, 500.0)),
        fio_job("rand-read-qd64", read=(1_638_400, 400.0)),
    ],
}


def test_it_reads_every_job_of_the_json_report_even_after_warnings():
    output = "fio: this platform does not support process shared mutexes\n" + json.dumps(REPORT)
    results = parse_fio(output)
    assert [r.name for r in results] == [name for name, _, _ in JOBS]
    assert results[0] == JobResult("seq-write", 0.0, 150.0, 0.0, 143.05)


def test_it_maps_jobs_to_disk_fields_in_mb_per_second_and_iops():
    assert disk_fields(parse_fio(json.dumps(REPORT))) == {
        "seq_write_mbps": 150.0,
        "seq_read_mbps": 180.0,
        "rand_write_iops_qd1": 300.0,
        "rand_read_iops_qd1": 200.0,
        "rand_write_iops_qd64": 500.0,
        "rand_read_iops_qd64": 400.0,
    }


def test_older_fio_without_bytes_per_second_is_read_from_kib():
    job = {"jobname": "seq-read", "error": 0, "read": {"bw": 1000, "iops": 1.0}, "write": {}}
    assert parse_fio(json.dumps({"jobs": [job]}))[0].read_mbps == pytest.approx(1.024)


def test_it_refuses_output_without_a_report_or_with_a_failed_job():
    with pytest.raises(FioOutputError, match="no JSON"):
        parse_fio("fio: engine libaio not loadable\n")
    with pytest.raises(FioOutputError, match="does not parse"):
        parse_fio('{"jobs": [')
    failed = {"jobs": [{**fio_job("seq-write"), "error": 28}]}
    with pytest.raises(FioOutputError, match="seq-write failed: error 28"):
        parse_fio(json.dumps(failed))


def test_the_command_scales_table_4_sizes_and_runs_jobs_one_after_the_other():
    argv = fio_arguments("/disk", "libaio", 16, 3)
    assert "--direct=1" in argv and "--runtime=3" in argv and "--output-format=json" in argv
    assert argv.count("--stonewall") == len(JOBS)
    assert "--size=64M" in argv and "--size=16M" in argv  # 1 GiB and 256 MiB divided by 16


@pytest.mark.django_db
def test_a_real_tiny_fio_run_on_a_lab_disk_measures_every_job(lab_cleanup, settings):
    settings.BENCH_SIZE_DIVISOR, settings.BENCH_RUNTIME_S = 256, 1
    disk = Disk.objects.filter(node__name="lab-1").order_by("mount_path").first()

    results = bench_disk(disk)

    assert set(results) == set(Disk.BENCH_FIELDS)
    assert all(value > 0 for value in results.values())
    assert not list(Path(disk.mount_path).glob(".platter-bench*"))  # fio removed its files


@pytest.mark.django_db
def test_bench_disks_measures_a_node_and_skips_disks_in_use(lab_cleanup, settings, capsys):
    settings.BENCH_SIZE_DIVISOR, settings.BENCH_RUNTIME_S = 256, 1
    disks = list(Disk.objects.filter(node__name="lab-ssh").order_by("mount_path"))
    for disk in disks[1:]:
        disk.state = Disk.State.RETIRED  # keep the test short: one disk measured over SSH
        disk.save()
    Disk.objects.filter(id=disks[1].id).update(state=Disk.State.ALLOCATED)

    call_command("bench_disks", "lab-ssh", "--set-kind")

    out = capsys.readouterr().out
    assert "skipped (in use)" in out and disks[1].mount_path in out
    measured = Disk.objects.get(id=disks[0].id)
    assert measured.measured_at is not None and measured.seq_read_mbps > 0
    # loop devices over one page-cached file answer like flash
    assert measured.kind == Disk.Kind.SSD


@pytest.mark.django_db(transaction=True)
def test_a_disk_under_benchmark_is_out_of_the_pool_and_comes_back(monkeypatch):
    """The scheduler cannot take a disk fio writes to; a worker that died mid-run leaves the
    disk marked benchmarking, and the next benchmark of its node gives it back first."""
    from django.contrib.auth import get_user_model

    from apps.clusters.reservation import Rejection, reserve
    from apps.clusters.tests.factories import make_cluster, make_network, make_node, wants
    from apps.inventory import benchmarks

    make_network()
    node = make_node(disks={"hdd": 2})
    first, second = node.disks.order_by("mount_path")
    Disk.objects.filter(id=second.id).update(state=Disk.State.BENCHMARKING)  # a dead worker's
    owner = get_user_model().objects.create_user("dora")
    seen = []

    def fake_bench(disk):
        seen.append(Disk.objects.get(id=disk.id).state)
        if len(seen) == 1:  # the scheduler, meanwhile, finds no free disk for two
            assert isinstance(reserve(make_cluster(owner, wants(1, disks=2)).id), Rejection)
        return dict.fromkeys(Disk.BENCH_FIELDS, 100.0)

    monkeypatch.setattr(benchmarks, "bench_disk", fake_bench)
    report = benchmarks.bench_node(node)
    assert seen == [Disk.State.BENCHMARKING, Disk.State.BENCHMARKING]
    assert sorted(report.measured) == [first.mount_path, second.mount_path]
    assert set(node.disks.values_list("state", flat=True)) == {Disk.State.AVAILABLE}
