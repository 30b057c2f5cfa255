"""What /metrics shows: gauges computed from Postgres at scrape time, Celery queue lengths from
the broker, and the histograms and counters the processes recorded (apps/metrics/store.py).

A scrape costs a handful of aggregate queries and two Redis round trips, whatever the size of
the inventory: nothing loops over disks or clusters in Python.
"""

import logging
from collections.abc import Iterator

import redis
from django.conf import settings
from django.core.cache import cache
from django.db.models import Count, Min, Q
from django.utils import timezone
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from apps.clusters.models import Cluster, DiskAllocation
from apps.clusters.node_usage import active_sum, free_disks
from apps.inventory.models import Disk, Node
from apps.metrics import recorded, store
from apps.usage.services import all_time_by_group
from portal import queues

log = logging.getLogger(__name__)
MB = 2**20


def cluster_metrics() -> Iterator[Metric]:
    states = Cluster.State.values
    counts = Cluster.objects.aggregate(
        **{f"n_{state}": Count("id", filter=Q(state=state)) for state in states},
        oldest_queued=Min("created", filter=Q(state=Cluster.State.QUEUED)),
    )
    clusters = GaugeMetricFamily("platter_clusters", "Clusters by state.", labels=["state"])
    for state in states:
        clusters.add_metric([state], counts[f"n_{state}"])
    yield clusters
    yield GaugeMetricFamily(
        "platter_admission_queue_length",
        "Clusters waiting in the admission queue for capacity (state queued).",
        value=counts["n_queued"],
    )
    oldest = counts["oldest_queued"]
    yield GaugeMetricFamily(
        "platter_admission_queue_oldest_seconds",
        "How long the oldest queued cluster has waited (0 when none waits).",
        value=(timezone.now() - oldest).total_seconds() if oldest else 0,
    )


def disk_metrics() -> Iterator[Metric]:
    counted = {
        (row["kind"], row["state"]): row["n"]
        for row in Disk.objects.order_by().values("kind", "state").annotate(n=Count("id"))
    }
    disks = GaugeMetricFamily("platter_disks", "Disks by kind and state.", labels=["kind", "state"])
    for kind in Disk.Kind.values:
        for state in Disk.State.values:
            disks.add_metric([kind, state], counted.get((kind, state), 0))
    yield disks
    keeping = dict(
        DiskAllocation.objects.filter(data_kept=True)
        .order_by()
        .values_list("disk__kind")
        .annotate(n=Count("id"))
    )
    kept = GaugeMetricFamily(
        "platter_disks_keeping_data",
        "Disks holding a destroyed cluster's data for a later reuse (free, reserved last).",
        labels=["kind"],
    )
    for kind in Disk.Kind.values:
        kept.add_metric([kind], keeping.get(kind, 0))
    yield kept


def node_metrics() -> Iterator[Metric]:
    kinds = Disk.Kind.values
    nodes = (
        Node.objects.order_by("name")
        .annotate(
            used_cores=active_sum("cores"),
            used_memory=active_sum("memory_mb"),
            **{f"free_{kind}": free_disks(kind) for kind in kinds},
        )
        .values(
            "name",
            "state",
            "cores",
            "memory_mb",
            "used_cores",
            "used_memory",
            *(f"free_{kind}" for kind in kinds),
        )
    )
    labels = ["node", "state"]
    cores = GaugeMetricFamily("platter_node_cores", "Cores of a node.", labels=labels)
    memory = GaugeMetricFamily("platter_node_memory_bytes", "Memory of a node.", labels=labels)
    free_cores = GaugeMetricFamily(
        "platter_node_free_cores", "Cores no active instance holds.", labels=labels
    )
    free_memory = GaugeMetricFamily(
        "platter_node_free_memory_bytes", "Memory no active instance holds.", labels=labels
    )
    free = GaugeMetricFamily(
        "platter_node_free_disks", "Disks free to reserve, by kind.", labels=[*labels, "kind"]
    )
    for node in nodes:
        name_state = [node["name"], node["state"]]
        cores.add_metric(name_state, node["cores"])
        memory.add_metric(name_state, node["memory_mb"] * MB)
        free_cores.add_metric(name_state, node["cores"] - node["used_cores"])
        free_memory.add_metric(name_state, (node["memory_mb"] - node["used_memory"]) * MB)
        for kind in kinds:
            free.add_metric([*name_state, kind], node[f"free_{kind}"])
    yield from (cores, memory, free_cores, free_memory, free)


def queue_metrics() -> Iterator[Metric]:
    """Messages waiting in each Celery queue (a Redis list named after the queue)."""
    broker = store.redis_client(settings.CELERY_BROKER_URL)
    with broker.pipeline(transaction=False) as pipe:
        for queue in queues.ALL_QUEUES:
            pipe.llen(queue)
        lengths = pipe.execute()
    family = GaugeMetricFamily(
        "platter_celery_queue_length", "Tasks waiting in a Celery queue.", labels=["queue"]
    )
    for queue, length in zip(queues.ALL_QUEUES, lengths, strict=True):
        family.add_metric([queue], length)
    yield family


USAGE_CACHE_SECONDS = 60
USAGE_HELP = {
    "core_h": ("platter_usage_core_hours", "Core-hours clusters held, per quota group."),
    "mem_gb_h": ("platter_usage_memory_gb_hours", "Memory GB-hours held, per quota group."),
    "hdd_h": ("platter_usage_hdd_hours", "HDD disk-hours held (stopped included), per group."),
    "ssd_h": ("platter_usage_ssd_hours", "SSD disk-hours held (stopped included), per group."),
}


def usage_metrics() -> Iterator[Metric]:
    """apps.usage's all-time figures per quota group, as counters (cached a minute: they read
    every cluster's life)."""
    by_group = cache.get_or_set(
        "metrics:usage-by-group", all_time_by_group, timeout=USAGE_CACHE_SECONDS
    )
    for figure, (name, text) in USAGE_HELP.items():
        family = CounterMetricFamily(name, text, labels=["group"])
        for group, figures in sorted((by_group or {}).items()):
            family.add_metric([group or "none"], figures[figure])
        yield family


class PlatterCollector:
    """A prometheus_client collector; every scrape reads everything afresh."""

    def collect(self) -> Iterator[Metric]:
        yield from cluster_metrics()
        yield from disk_metrics()
        yield from node_metrics()
        redis_up = 1
        try:
            yield from usage_metrics()
        except (redis.RedisError, OSError) as error:
            log.warning("usage figures left out of the scrape: %s", error)
            redis_up = 0
        try:
            families = [*queue_metrics(), *store.read(recorded.ALL)]
        except (redis.RedisError, OSError) as error:
            log.warning("metrics from Redis left out of the scrape: %s", error)
            families, redis_up = [], 0
        yield from families
        yield GaugeMetricFamily(
            "platter_metrics_redis_up",
            "1 when the scrape could read queue lengths and recorded metrics from Redis.",
            value=redis_up,
        )


# A registry of our own: the process-wide default one would add this process's own figures
# (one gunicorn process among several), which mean nothing for the portal as a whole.
REGISTRY = CollectorRegistry(auto_describe=False)
REGISTRY.register(PlatterCollector())


def exposition() -> bytes:
    """Every metric in Prometheus' text format."""
    return generate_latest(REGISTRY)
