"""The benches' raw paths (bench/time_to_ready: raw `docker run` of Platter's own plans, for the
demo and for the products) for one tiny round on the real lab, so a change of the plans (their
network, addresses, binds) cannot break the benches silently again."""

import ipaddress
from pathlib import Path

import pytest

from apps.catalog.services import load_catalog
from apps.inventory.models import Network
from apps.nodes import engine

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def bench():
    """bench/time_to_ready.py, its raw path and its products part."""
    from bench import raw_path, time_to_ready, time_to_ready_products

    return time_to_ready, raw_path, time_to_ready_products


def raw_containers(nodes, label: str) -> list[str]:
    return [
        name
        for node in nodes
        for found in engine.cached(node).api.containers(all=True, filters={"label": label})
        for name in found["Names"]
    ]


def test_it_runs_each_raw_path_for_one_round_and_leaves_nothing(
    bench, dispatching, lab_cleanup, alice
):
    ready, raw_path, products = bench
    load_catalog()
    _seconds, plans = ready.platter_run(alice, ready.bench_version(), 1, "raw-path")

    copies = raw_path.raw_plans(plans, 0)
    segment = next(n for n in Network.objects.all() if n.docker_name == plans[0].network)
    assert copies[0].network == plans[0].network
    assert ipaddress.ip_address(copies[0].address) in ipaddress.ip_network(segment.subnet)
    assert copies[0].address != plans[0].address
    assert copies[0].extra_hosts == {plans[0].hostname: copies[0].address}

    assert ready.raw_run(plans, 0) > 0  # the demo's: started on the segment, then removed
    run = products.raw_run(plans, [], ["true"], 1)  # the products': containers, then the job
    assert [name for name, _at in run["phases"]] == ["containers"] and run["job"] > 0
    assert raw_containers(lab_cleanup, raw_path.RAW_LABEL) == []
    data = [bind.split(":")[0] for copy in raw_path.raw_plans(plans, 1) for bind in copy.binds]
    assert data and not any(Path(folder).exists() for folder in data)


def test_a_failed_round_and_an_interrupted_run_leave_nothing_behind(
    bench, dispatching, lab_cleanup, alice
):
    ready, raw_path, products = bench
    load_catalog()
    _seconds, plans = ready.platter_run(alice, ready.bench_version(), 1, "raw-fails")

    with pytest.raises(SystemExit, match="false failed in"):
        products.raw_run(plans, [], ["false"], 0)  # the job fails after the start
    assert raw_containers(lab_cleanup, raw_path.RAW_LABEL) == []

    # A run killed mid-round leaves its container: the next run removes it before it starts.
    raw_path.start_plan(raw_path.raw_plans(plans, 1)[0])
    assert len(raw_containers(lab_cleanup, raw_path.RAW_LABEL)) == 1
    assert raw_path.remove_leftovers(lab_cleanup) == 1
    assert raw_containers(lab_cleanup, raw_path.RAW_LABEL) == []
