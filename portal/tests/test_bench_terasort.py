"""bench/terasort's pure parts: the coupling layouts it registers, the device counters it reads
and the table it prints (the bench itself needs root, the lab and minutes; see its docstring)."""

import pytest

from portal.tests.bench_scripts import load_bench

terasort = load_bench("terasort")
NODES = ["lab-1", "lab-2"]


def test_coupling_1_gives_every_worker_a_disk_of_its_own():
    plan = terasort.plan_layout(1, 4, NODES)
    assert [v.physical for v in plan] == [0, 1, 2, 3]
    assert [v.node for v in plan] == ["lab-1", "lab-1", "lab-2", "lab-2"]


def test_coupling_2_puts_two_workers_of_one_node_on_one_disk():
    plan = terasort.plan_layout(2, 4, NODES)
    assert [v.physical for v in plan] == [0, 0, 1, 1]
    for disk in (0, 1):
        assert len({v.node for v in plan if v.physical == disk}) == 1


def test_coupling_4_puts_every_volume_on_one_disk():
    plan = terasort.plan_layout(4, 4, NODES)
    assert {v.physical for v in plan} == {0}
    assert [v.index for v in plan] == [0, 1, 2, 3]


@pytest.mark.parametrize(
    ("coupling", "volumes", "nodes", "message"),
    [
        (3, 4, NODES, "coupling 3 does not divide 4 volumes"),
        (0, 4, NODES, "coupling 0 does not divide 4 volumes"),
        (1, 3, NODES, "3 volumes do not split evenly over 2 nodes"),
        (1, 0, NODES, "at least one volume"),
        (1, 4, [], "at least one volume and one node"),
    ],
)
def test_an_impossible_layout_is_refused_naming_why(coupling, volumes, nodes, message):
    with pytest.raises(ValueError, match=message):
        terasort.plan_layout(coupling, volumes, nodes)


def test_layouts_parse_sorted_and_need_coupling_1():
    assert terasort.parse_layouts("4,1,2,1", 4) == [1, 2, 4]
    with pytest.raises(ValueError, match="need coupling 1"):
        terasort.parse_layouts("2,4", 4)
    with pytest.raises(ValueError, match="'two' is not a whole number"):
        terasort.parse_layouts("1,two", 4)
    with pytest.raises(ValueError, match="coupling 3 does not divide"):
        terasort.parse_layouts("1,3", 4)


def test_device_counters_are_read_in_bytes():
    line = "     96        0    68818       19      158      161   306848      182   0   68  274"
    assert terasort.disk_bytes(line) == (68818 * 512, 306848 * 512)
    with pytest.raises(ValueError, match="not a block device stat line"):
        terasort.disk_bytes("7 0")


def run(coupling: int, sort: float, moved_mb: list[float]) -> object:
    seconds = {"teragen": 10.0, "terasort": sort, "teravalidate": 5.0}
    return terasort.Run(coupling, seconds, [int(m * 1e6) for m in moved_mb])


def test_rows_give_min_median_max_per_disk_figures_and_ratio_to_coupling_1():
    runs = [
        run(1, 100, [200, 200, 200, 200]),
        run(1, 120, [200, 200, 200, 200]),
        run(1, 110, [200, 200, 200, 200]),
        run(4, 330, [800]),
        run(4, 300, [800]),
        run(4, 360, [800]),
    ]
    rows = terasort.summarize(runs)
    assert [r.coupling for r in rows] == [1, 4]
    base, coupled = rows
    assert (base.runs, base.sort) == (3, (100, 110, 120))
    assert coupled.sort == (300, 330, 360)
    assert base.ratio == 1
    assert coupled.ratio == pytest.approx(3.0)
    assert (base.moved_mb, coupled.moved_mb) == (200, 800)
    # MB/s per disk: each run's MB over its own sort, the median of those
    assert base.mbps == pytest.approx(200 / 110)
    assert coupled.mbps == pytest.approx(800 / 330)
    lines = terasort.table(rows).splitlines()
    assert lines[0].split()[:2] == ["layout", "n"]
    assert lines[2].split() == [
        "c=1",
        "Platter",
        "3",
        "100.0",
        "110.0",
        "120.0",
        "10.0",
        "5.0",
        "200",
        "1.8",
        "1.00",
    ]
    assert lines[3].startswith("c=4 coupled") and lines[3].endswith("3.00")


def test_rows_need_a_coupling_1_run():
    with pytest.raises(ValueError, match="no run at coupling 1"):
        terasort.summarize([run(2, 100, [100])])
