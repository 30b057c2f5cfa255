"""bench/api's own arithmetic: wrk's figures, the CPU of the database's backends over a run,
the ceiling they give."""

import pytest

from portal.tests.bench_scripts import load_bench

WRK = """Running 20s test @ http://127.0.0.1:40000
  2 threads and 32 connections
  Latency Distribution
     50%   12.50ms
     75%   20.00ms
     90%  850.00us
     99%    1.20s
  6000 requests in 20.00s, 3.00MB read
  Non-2xx or 3xx responses: 3
Requests/sec:    300.25
"""


def test_it_reads_wrks_figures_in_milliseconds():
    parsed = load_bench("api").parse_wrk(WRK)
    assert parsed["rate"] == 300.25 and parsed["requests"] == 6000 and parsed["non_2xx"] == 3
    assert (parsed["p50"], parsed["p90"], parsed["p99"]) == (12.5, 0.85, 1200.0)


def test_the_databases_cpu_counts_only_backends_that_lived_through_the_run():
    bench = load_bench("api")
    assert bench.database_cpu_between({1: 2.0, 2: 1.0}, {1: 2.5, 3: 0.25}) == 0.75
    # Every backend came and went with its request: their CPU cannot be counted.
    assert bench.database_cpu_between({1: 2.0}, {4: 0.1}) is None


def test_the_ceiling_is_the_cores_over_the_cpu_of_a_request():
    bench = load_bench("api")
    assert bench.ceiling({"cpu_ms": 5.0, "db_ms": 1.5, "wrk_ms": 0.5}, 2) == pytest.approx(2000 / 7)
    assert bench.ceiling({"cpu_ms": 5.0, "db_ms": None, "wrk_ms": 0.5}, 2) is None
