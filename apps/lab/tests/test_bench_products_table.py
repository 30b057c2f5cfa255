"""bench/time_to_ready --products without the lab: the stock path's copies (the same plans, the
fast start turned off) and the table of Platter, raw and stock with the ratios and the aims."""

from types import SimpleNamespace

import pytest
from django.conf import settings

from apps.nodes.specs import ContainerSpec


@pytest.fixture
def bench():
    from bench import raw_path, time_to_ready_products

    return raw_path, time_to_ready_products


def plan(n: int) -> ContainerSpec:
    return ContainerSpec(
        instance_id=n,
        node=None,
        name=f"bench-c7-worker-{n}",
        image="platter/spark:4.3.0",
        hostname=f"worker-{n}",
        address=f"10.213.1.{10 + n}",
        network="platter-seg-1",
        command=["/opt/platter/bin/spark-start", "worker"],
        environment={"PLATTER_ROLE": "worker"},
        labels={"platter.cluster": "7"},
        cores=1,
        memory_mb=1024,
        binds=[f"/srv/disk{n}/cluster-7:/data/1"],
        capabilities=[],
        extra_hosts={},
    )


def test_stock_copies_are_the_plans_with_the_fast_start_off(bench, monkeypatch):
    raw_path, products = bench
    segment = SimpleNamespace(first_address="10.213.1.2", last_address="10.213.1.254")
    monkeypatch.setattr(raw_path, "segment_of", lambda _name: segment)
    monkeypatch.setattr(settings, "PLATTER_SITE", "bench")  # main() sets the bench's site
    plans = [plan(0), plan(1)]

    raw = raw_path.raw_plans(plans, 3)
    stock = raw_path.raw_plans(plans, 3, "stock", products.STOCK_ENVIRONMENT)

    assert [c.name for c in raw] == ["bench-raw-3-0", "bench-raw-3-1"]
    assert [c.name for c in stock] == ["bench-stock-3-0", "bench-stock-3-1"]
    assert raw[0].environment == {"PLATTER_ROLE": "worker"}  # the plan's, untouched
    assert stock[0].environment == {"PLATTER_ROLE": "worker", "PLATTER_FAST_START": "0"}
    assert plans[0].environment == {"PLATTER_ROLE": "worker"}
    assert stock[1].binds == ["/srv/disk1/stock-3-7:/data/1"]
    assert {c.address for c in stock}.isdisjoint({p.address for p in plans})
    assert stock[0].command == plans[0].command and stock[0].image == plans[0].image


def runs(*ready_job: tuple[float, float]) -> list[dict]:
    return [{"ready": r, "job": j, "phases": []} for r, j in ready_job]


def test_the_table_shows_platter_raw_and_stock_with_ratios_against_the_aims(bench):
    _raw_path, products = bench
    ours = runs((10.0, 30.0), (12.0, 31.0), (11.0, 40.0))
    raw = runs((10.0, 29.0), (10.0, 28.0), (10.5, 29.5))
    stock = runs((20.0, 45.0), (16.0, 44.0), (18.0, 43.0))

    row = products.summarise("spark", ours, raw, stock)

    assert (row["ready"], row["raw_ready"], row["stock_ready"]) == (11.0, 10.0, 18.0)
    assert (row["job"], row["raw_job"], row["stock_job"]) == (31.0, 29.0, 44.0)
    assert row["vs_raw"] == pytest.approx(1.1) and row["vs_stock"] == pytest.approx(11 / 18)
    assert row["met"] == "both" and row["n"] == 3
    line = products.format_row(row)
    assert line.split()[:8] == ["spark", "3", "11.0", "10.0", "18.0", "1.10", "0.61", "both"]
    header = products.header()
    assert len(header[-2]) == len(line) == len(header[-1])  # columns line up
    assert "aim <= 1.1" in header[1] and "aim <= 0.7" in header[1]

    slow = products.summarise("hadoop", runs((30.0, 60.0)), runs((20.0, 50.0)), stock)
    assert slow["met"] == "NO"  # 1.5x raw and 1.67x stock: neither aim
    assert (
        products.summarise("x", runs((9.0, 1.0)), runs((9.0, 1.0)), runs((10.0, 1.0)))["met"]
        == "raw"
    )
