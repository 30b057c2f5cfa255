"""Job slots, shared fairly: at most JOBS_PER_USER_RUNNING of one user's jobs hold a slot at
once, JOBS_RUNNING_MAX in all. A job holds a slot from its admission (its task is sent then,
and only then) until it ends. The others wait queued, their reason saying why; a free slot goes
to the waiting user who holds the fewest, their oldest submission first, so one user's eight
long jobs never keep another's short one waiting behind them.

Every pass runs under one transaction-scoped advisory lock: two passes at once (a submit, the
end of a job, beat's) would each count the slots before the other's admissions and together
pass the caps. The candidates are locked with skip_locked, so a cancel holding a job's row is
never waited for (that job waits for the next pass)."""

import logging
from collections import Counter
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Count, F, Q, Window
from django.db.models.functions import RowNumber
from django.utils import timezone

from apps.tasks import bus
from portal import locks

from .models import ENDED, Job, JobFile

log = logging.getLogger(__name__)
J = Job.State
RUN = "platter.run_job"
# Holds a slot: running, or admitted and waiting for its worker to start it.
HOLDS_SLOT = Q(state=J.RUNNING) | Q(state=J.QUEUED, admitted__isnull=False)


@dataclass(frozen=True)
class Waiting:
    id: int
    owner_id: int
    submitted: datetime


def admit() -> list[int]:
    """Give free job slots to waiting jobs, fairly; returns the ids admitted. Their tasks go
    to the jobs queue once the transaction commits (inside one, the lock is held to its end:
    a submit admits its own job before it commits)."""
    with transaction.atomic():
        locks.transaction_lock(locks.JOB_ADMISSION, 0)
        return _admit_locked(timezone.now())


def admission_pass() -> list[int]:
    """Beat's pass: admit; send again the task of a job admitted long ago that no worker
    started (a message the broker lost); drop the uploads of ended jobs a crash left."""
    admitted = admit()
    _resend_stale()
    JobFile.objects.filter(job__state__in=ENDED).delete()
    return admitted


def admit_after_commit() -> None:
    """A slot may have freed (a job ended or was cancelled): admit once this commits (at
    once outside a transaction). A pass that fails leaves the jobs to beat's."""
    transaction.on_commit(_admit_quietly)


def _admit_quietly() -> None:
    try:
        admit()
    except Exception:  # runs after others' commits: never fail their work
        log.exception("could not admit queued jobs; beat's pass tries again")


def _admit_locked(now: datetime) -> list[int]:
    per_user, most = settings.JOBS_PER_USER_RUNNING, settings.JOBS_RUNNING_MAX
    holding = Counter(
        dict(
            Job.objects.filter(HOLDS_SLOT)
            .values("owner_id")
            .annotate(n=Count("id"))
            .values_list("owner_id", "n")
        )
    )
    free = most - sum(holding.values())
    queues: dict[int, list[Waiting]] = {}
    for job in _waiting(per_user):
        queues.setdefault(job.owner_id, []).append(job)
    chosen: list[int] = []
    while free > 0:
        eligible = [o for o, q in queues.items() if q and holding[o] < per_user]
        if not eligible:
            break
        owner = min(eligible, key=lambda o: (holding[o], queues[o][0].submitted, queues[o][0].id))
        chosen.append(queues[owner].pop(0).id)
        holding[owner] += 1
        free -= 1
    # The rows, locked: one a cancel holds (or ended meanwhile) is left for the next pass.
    locked = list(
        Job.objects.select_for_update(skip_locked=True)
        .filter(id__in=chosen, state=J.QUEUED, admitted__isnull=True)
        .values_list("id", flat=True)
    )
    Job.objects.filter(id__in=locked).update(admitted=now, reason="")
    for job_id in locked:
        bus.dispatch(RUN, job_id)
    _explain(queues, holding, per_user, most)
    if locked:
        log.info("admitted jobs %s", locked)
    return locked


def _waiting(per_user: int) -> list[Waiting]:
    """The first `per_user` waiting jobs of each user (no more can be admitted in one pass),
    oldest first: the pass reads a few rows per user, however many one user queued."""
    ranked = (
        Job.objects.filter(state=J.QUEUED, admitted__isnull=True)
        .annotate(
            rank=Window(RowNumber(), partition_by=F("owner_id"), order_by=["submitted", "id"])
        )
        .filter(rank__lte=per_user)
        .order_by("submitted", "id")
        .values_list("id", "owner_id", "submitted")
    )
    return [Waiting(*row) for row in ranked]


def _explain(queues: dict[int, list[Waiting]], holding: Counter, per_user: int, most: int) -> None:
    """Each waiting job says why it waits (every one of its user's, not only the first few)."""
    for owner in queues:
        if holding[owner] >= per_user:
            reason = f"waiting: you have {holding[owner]} jobs running, the limit is {per_user}"
        else:
            reason = (
                f"waiting for a free job slot: the portal runs at most {most} jobs at once, "
                "shared fairly between users"
            )
        Job.objects.filter(owner_id=owner, state=J.QUEUED, admitted__isnull=True).exclude(
            reason=reason
        ).update(reason=reason)


def _resend_stale() -> None:
    """An admitted job no worker started within JOB_FOLLOWER_LOST_SECONDS: its message was
    lost (a broker that was down when it was sent). Sent again; a worker that gets it twice
    starts it once (services.start is a compare-and-swap)."""
    now = timezone.now()
    cutoff = now - timedelta(seconds=settings.JOB_FOLLOWER_LOST_SECONDS)
    stale = Job.objects.filter(state=J.QUEUED, admitted__lt=cutoff)
    for job_id in stale.values_list("id", flat=True):
        if Job.objects.filter(id=job_id, state=J.QUEUED, admitted__lt=cutoff).update(admitted=now):
            log.warning("job %s: admitted but not started; its task is sent again", job_id)
            bus.dispatch(RUN, job_id)
