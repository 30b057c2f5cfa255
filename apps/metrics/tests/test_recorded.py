"""Histograms and counters recorded in Redis by whichever process did the work."""

import logging

import pytest

from apps.clusters.reservation import Rejection, Reservation, reserve
from apps.clusters.tests.factories import make_cluster, make_network, make_node, wants
from apps.metrics import store
from apps.metrics.recorded import RESERVATION_SECONDS, TASK_FAILURES

from .conftest import value

pytestmark = pytest.mark.django_db


def buckets(samples: dict, name: str, **labels: str) -> list[tuple[float, float]]:
    """(upper bound, cumulative count) of one histogram series, by bound."""
    found = []
    for (sample, sample_labels), count in samples.items():
        as_dict = dict(sample_labels)
        le = as_dict.pop("le", None)
        if sample == f"{name}_bucket" and as_dict == labels:
            found.append((float(le), count))
    return sorted(found)


def test_real_reservations_show_up_as_a_prometheus_histogram(scrape, alice):
    make_network()
    for _ in range(3):
        make_node(disks={"hdd": 4})
    placed = [make_cluster(alice, wants(1, disks=2)) for _ in range(4)]  # quota: 5 clusters
    too_big = make_cluster(alice, wants(1, disks=9))
    for cluster in placed:
        assert isinstance(reserve(cluster.id), Reservation)
    assert isinstance(reserve(too_big.id), Rejection)

    samples = scrape()
    name = "platter_reservation_seconds"
    assert value(samples, f"{name}_count", outcome="reserved") == len(placed)
    assert value(samples, f"{name}_count", outcome="capacity") == 1
    assert value(samples, f"{name}_sum", outcome="reserved") > 0
    series = buckets(samples, name, outcome="reserved")
    assert [bound for bound, _ in series] == [*RESERVATION_SECONDS.buckets, float("inf")]
    counts = [count for _, count in series]
    assert counts == sorted(counts), "buckets are cumulative"
    assert counts[-1] == len(placed)


def test_a_failing_call_is_timed_as_an_error():
    histogram = store.Histogram("platter_test_seconds", "test", ("outcome",), (0.1, 1.0))

    @store.timed(histogram, outcome=lambda result: "ok")
    def broken() -> None:
        raise ValueError("boom")

    try:
        with pytest.raises(ValueError, match="boom"):
            broken()
        (family,) = store.read([histogram])
        counts = {s.name: s.value for s in family.samples if s.labels.get("outcome") == "error"}
        assert counts["platter_test_seconds_count"] == 1
    finally:
        store.clear([histogram])


def test_counters_add_up_across_calls_and_labels(scrape):
    TASK_FAILURES.inc(task="platter.a")
    TASK_FAILURES.inc(2, task="platter.a")
    TASK_FAILURES.inc(task="platter.b")
    samples = scrape()
    assert value(samples, "platter_task_failures_total", task="platter.a") == 3
    assert value(samples, "platter_task_failures_total", task="platter.b") == 1


def test_a_reservation_goes_through_when_redis_is_away(settings, alice, caplog):
    make_network()
    make_node()
    cluster = make_cluster(alice, wants(1))
    settings.CACHES = {
        "default": {**settings.CACHES["default"], "LOCATION": "redis://127.0.0.1:1/0"}
    }
    with caplog.at_level(logging.WARNING, logger="apps.metrics.store"):
        assert isinstance(reserve(cluster.id), Reservation)
    assert "metric not recorded" in caplog.text
