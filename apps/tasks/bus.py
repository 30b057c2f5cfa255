"""Handing work to the Celery workers, by task name so no app imports the workers package
(the workers import the apps): the cluster operations' names, and dispatch/send for those and
for the names other apps keep with their own work (apps/jobs/services.py,
apps/accounts/ssh_sync.py)."""

import logging

from django.conf import settings
from django.db import transaction

log = logging.getLogger(__name__)

LAUNCH = "platter.launch_cluster"
STOP = "platter.stop_cluster"
START = "platter.start_cluster"
DESTROY = "platter.destroy_cluster"
RESIZE = "platter.resize_cluster"
ADMIT = "platter.admit_queued"
BENCH_DISKS = "platter.bench_disks"
APPLY_PERIMETER = "platter.apply_perimeter"


def dispatch(task: str, *args) -> None:
    """Send the task once the current transaction commits: a worker must never look for a
    cluster, or a state, that is not committed yet (or never will be)."""
    if not settings.DISPATCH_CLUSTER_TASKS:
        return
    transaction.on_commit(lambda: send(task, *args))


def send(task: str, *args) -> bool:
    """Hand the task to the broker now; False when it does not take it. The request that
    wrote the work has committed by then, so a broker that is down must not turn its answer
    into a 500 (a client would retry a launch that happened): the work is in the database,
    and beat's passes hand it out again (admit_queued for queued clusters, resume_stalled
    for those left mid-way)."""
    from portal.celery import app

    try:
        # No result: nobody waits for these by id, and subscribing to one is a second
        # round of retries against a Redis that is down.
        app.send_task(task, args=list(args), ignore_result=True)
    except Exception as error:  # noqa: BLE001 (whatever the broker raised, the answer stands)
        log.warning(
            "could not hand %s%s to the workers: %s; beat retries it", task, tuple(args), error
        )
        return False
    return True
