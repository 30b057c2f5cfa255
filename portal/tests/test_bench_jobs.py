"""bench/jobs's table: medians and p95s per path and the aim's verdict (the bench itself needs
the lab, a Spark cluster and minutes; see its docstring)."""

from portal.tests.bench_scripts import load_bench

jobs = load_bench("jobs")


def rounds(raw: list[float], platter: list[float]) -> list:
    return [jobs.Round("raw", d / 2, d) for d in raw] + [
        jobs.Round("platter", d / 2, d) for d in platter
    ]


def test_the_table_gives_both_paths_and_meets_the_aim_within_its_bound():
    text = jobs.table(rounds([10, 11, 12], [12, 13, 13.1]))
    raw, platter = text.splitlines()[1:3]
    assert raw.split()[:2] == ["raw", "3"] and raw.split()[4] == "11.00"
    assert platter.split()[:2] == ["platter", "3"] and platter.split()[4] == "13.00"
    assert "1.18x raw 11.00 s (+2.00 s)" in text and "= 14.20 s: met" in text


def test_the_table_says_when_the_aim_is_not_met():
    text = jobs.table(rounds([10, 10, 10], [13, 13, 13]))
    assert "aim <= 1.2x + 1 s = 13.00 s: met" in text
    assert "= 13.00 s: NOT met" in jobs.table(rounds([10, 10, 10], [13.5, 13.5, 13.5]))
