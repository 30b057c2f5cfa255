"""Handing a user's SSH-key changes to the workers, coalesced per user.

Each live cluster of the user costs an exec of up to half a minute (workers/ssh_keys.py), so
one run per change would let a user who pastes twenty keys queue twenty times that. Instead a
user has at most one pending run: a change while one is pending joins it (that run reads the
keys when it starts, so it writes this change too); a change while one runs queues exactly one
more, which starts once the running one ended (the worker takes the user's lock, see
workers/ssh_keys.py). So the last change always lands, and a user never has more than one run
waiting and one running.

The pending mark lives in the cache (Redis): set with SET NX when a run is queued, removed by
that run when it starts. It expires after PENDING_SECONDS, so a run the broker lost (a Redis
restart) blocks nobody's later changes for longer than that.
"""

import logging

from django.conf import settings
from django.core.cache import cache
from django.db import transaction

from apps.tasks import bus

log = logging.getLogger(__name__)
SYNC_TASK = "platter.sync_ssh_keys"
PENDING_SECONDS = 15 * 60  # longer than any queue wait we expect; see above


def pending_key(user_id: int) -> str:
    return f"platter:{settings.PLATTER_SITE}:ssh-sync-pending:{user_id}"


def request_sync(user_id: int) -> None:
    """Queue a sync of the user's keys once the current transaction commits, unless one is
    pending already (it will read this change)."""
    if settings.DISPATCH_CLUSTER_TASKS:
        transaction.on_commit(lambda: queue_sync(user_id))


def queue_sync(user_id: int) -> bool:
    """Send a sync task if none is pending for the user; whether one was sent."""
    try:
        if not cache.add(pending_key(user_id), 1, timeout=PENDING_SECONDS):
            return False  # the pending run reads the keys when it starts
    except Exception as error:  # noqa: BLE001 (Redis away: the broker is too, see bus.send)
        log.warning("ssh keys of user %s: no sync queued: %s", user_id, error)
        return False
    if bus.send(SYNC_TASK, user_id):
        return True
    cache.delete(pending_key(user_id))  # never sent: the next change tries again
    return False


def starting(user_id: int) -> None:
    """A run is about to read the user's keys: a change from now on needs a run of its own."""
    cache.delete(pending_key(user_id))
