"""Handing cluster work to the Celery workers, by task name so the clusters app does not
import the workers package (the workers import the clusters app)."""

from django.conf import settings
from django.db import transaction

LAUNCH = "platter.launch_cluster"
STOP = "platter.stop_cluster"
START = "platter.start_cluster"
DESTROY = "platter.destroy_cluster"
ADMIT = "platter.admit_queued"


def dispatch(task: str, *args) -> None:
    """Send the task once the current transaction commits: a worker must never look for a
    cluster, or a state, that is not committed yet (or never will be)."""
    if not settings.DISPATCH_CLUSTER_TASKS:
        return
    from portal.celery import app

    transaction.on_commit(lambda: app.send_task(task, args=list(args)))
