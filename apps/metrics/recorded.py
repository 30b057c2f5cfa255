"""The metrics processes record as they work (see store.py for where they are kept)."""

from .store import Counter, Histogram

RESERVATION_SECONDS = Histogram(
    "platter_reservation_seconds",
    "Reservation transactions (apps.clusters.reservation.reserve), by outcome: reserved, or "
    "the rejection's cause (quota, capacity, reuse, network, state, contention).",
    labels=("outcome",),
    buckets=(0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0),
)
PLACEMENT_SECONDS = Histogram(
    "platter_placement_seconds",
    "Launches in a worker, from taking the cluster to running or failed, by outcome.",
    labels=("outcome",),
    buckets=(0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0, 600.0),
)
TASKS = Counter(
    "platter_tasks",
    "Celery tasks finished, by task and state (SUCCESS, FAILURE, RETRY).",
    labels=("task", "state"),
)
TASK_FAILURES = Counter(
    "platter_task_failures", "Celery tasks that raised, by task.", labels=("task",)
)

ALL = (RESERVATION_SECONDS, PLACEMENT_SECONDS, TASKS, TASK_FAILURES)
