"""Histograms and counters that any process adds to, kept in Redis and read at scrape time.

The portal runs as several gunicorn processes and Celery workers on several machines, so a
metric held in one process's memory would show one process's share. Instead every observation
goes to one Redis hash per metric (fields are label values plus a bucket, or the sum) in one
pipelined round trip, and /metrics (apps/exporter/collector.py) turns the hashes into
Prometheus histograms and counters.

Recording never gets in the way of the work it measures: a Redis error is logged and dropped.
"""

import functools
import json
import logging
import time
from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, ParamSpec, TypeVar

import redis
from django.conf import settings
from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily
from prometheus_client.utils import floatToGoString

log = logging.getLogger(__name__)

KEY_PREFIX = "platter:metrics:"
# A metric is not worth holding up a reservation or a task: give up on Redis quickly.
REDIS_TIMEOUT_SECONDS = 0.5

P = ParamSpec("P")
R = TypeVar("R")


@functools.cache
def _client_for(url: str) -> redis.Redis:
    return redis.Redis.from_url(
        url, socket_timeout=REDIS_TIMEOUT_SECONDS, socket_connect_timeout=REDIS_TIMEOUT_SECONDS
    )


def client() -> redis.Redis:
    """The Redis the cache uses (the test settings give every run a database of its own)."""
    location = settings.CACHES["default"]["LOCATION"]
    return _client_for(location if isinstance(location, str) else next(iter(location)))


def redis_client(url: str) -> redis.Redis:
    """A pooled client for another Redis URL (the broker's, for queue lengths)."""
    return _client_for(url)


def _field(*parts: str) -> str:
    return json.dumps(parts)


def _write(commands: Callable[[redis.client.Pipeline], object]) -> None:
    # Not a MULTI/EXEC transaction: a scrape may see a bucket counted a moment before its sum,
    # which no rate() notices, and the two extra commands cost every reservation a fifth more.
    try:
        with client().pipeline(transaction=False) as pipe:
            commands(pipe)
            pipe.execute()
    except (redis.RedisError, OSError) as error:
        log.warning("metric not recorded (Redis: %s)", error)


@dataclass(frozen=True)
class Counter:
    name: str  # without the _total suffix the exposition adds
    documentation: str
    labels: tuple[str, ...]

    @property
    def key(self) -> str:
        return KEY_PREFIX + self.name

    def inc(self, amount: int = 1, **labels: object) -> None:
        field = _field(*(str(labels[name]) for name in self.labels))
        _write(lambda pipe: pipe.hincrby(self.key, field, amount))

    def family(self, stored: dict[bytes, bytes]) -> CounterMetricFamily:
        family = CounterMetricFamily(self.name, self.documentation, labels=self.labels)
        for field, value in sorted(stored.items()):
            family.add_metric(json.loads(field), float(value))
        return family


@dataclass(frozen=True)
class Histogram:
    name: str
    documentation: str
    labels: tuple[str, ...]
    buckets: tuple[float, ...]  # upper bounds, ascending; +Inf is implied

    @property
    def key(self) -> str:
        return KEY_PREFIX + self.name

    @functools.cached_property
    def bounds(self) -> list[str]:
        """The buckets' upper bounds as the exposition writes them (formatted once: observe()
        runs after every reservation)."""
        return [floatToGoString(bound) for bound in self.buckets] + ["+Inf"]

    def observe(self, seconds: float, **labels: object) -> None:
        values = [str(labels[name]) for name in self.labels]
        # Only the bucket the value falls in is stored; the scrape adds them up (cumulative).
        bound = self.bounds[bisect_left(self.buckets, seconds)]

        def commands(pipe: redis.client.Pipeline) -> None:
            pipe.hincrby(self.key, _field("bucket", bound, *values), 1)
            pipe.hincrbyfloat(self.key, _field("sum", *values), seconds)

        _write(commands)

    def family(self, stored: dict[bytes, bytes]) -> HistogramMetricFamily:
        counts: dict[tuple[str, ...], dict[str, int]] = {}
        sums: dict[tuple[str, ...], float] = {}
        for field, value in stored.items():
            kind, *rest = json.loads(field)
            if kind == "bucket":
                bound, *values = rest
                counts.setdefault(tuple(values), {})[bound] = int(value)
            else:
                sums[tuple(rest)] = float(value)
        family = HistogramMetricFamily(self.name, self.documentation, labels=self.labels)
        for values in sorted(counts):
            family.add_metric(
                list(values), list(_cumulative(self.bounds, counts[values])), sums[values]
            )
        return family


def _cumulative(bounds: list[str], counts: dict[str, int]) -> Iterator[tuple[str, int]]:
    total = 0
    for bound in bounds:
        total += counts.get(bound, 0)
        yield bound, total


def timed(histogram: Histogram, outcome: Callable[[Any], str]) -> Callable:
    """Decorator: observe how long each call took, labelled outcome=outcome(result), or
    outcome="error" when it raised."""

    def decorate(function: Callable[P, R]) -> Callable[P, R]:
        @functools.wraps(function)
        def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
            started = time.perf_counter()
            label = "error"
            try:
                result = function(*args, **kwargs)
                label = outcome(result)
                return result
            finally:
                histogram.observe(time.perf_counter() - started, outcome=label)

        return wrapper

    return decorate


def read(metrics: Iterable[Counter | Histogram]) -> list:
    """The metric families of everything recorded, in one round trip to Redis. Raises
    redis.RedisError / OSError when Redis does not answer."""
    metrics = list(metrics)
    with client().pipeline(transaction=False) as pipe:
        for metric in metrics:
            pipe.hgetall(metric.key)
        stored = pipe.execute()
    return [metric.family(values) for metric, values in zip(metrics, stored, strict=True)]


def clear(metrics: Iterable[Counter | Histogram]) -> None:
    """Forget everything recorded (tests start from zero)."""
    client().delete(*(metric.key for metric in metrics))
