"""The rules of jobs: what may be submitted where, the caps on uploads and on the log, and
every state change as a compare-and-swap, so the worker, a cancel and a cluster that stops
never both win.

    queued -> running -> succeeded | failed | killed
    queued -> killed (cancelled before it ran) | failed (its cluster stopped or failed)

A queued job runs once admitted (admission.py: fair shares of the job slots). Its uploads
leave the database when it ends: they were copied into its container when it started.
"""

import logging
import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import connection, transaction
from django.db.models import Q, QuerySet, Sum
from django.utils import timezone

from apps.audit.models import AuditEvent
from apps.audit.services import Actor, record
from apps.clusters.models import Cluster
from apps.clusters.states import State
from apps.products.registry import plugin_for
from apps.tasks import bus

from . import admission
from .models import ENDED, LIVE, Job, JobFile

log = logging.getLogger(__name__)
FOLLOW = "platter.follow_job"  # goes on following a running job whose follower was lost
K = Job.Kind
J = Job.State
FILE_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._-]{0,127}$")
PROPERTY = re.compile(r"^[A-Za-z][A-Za-z0-9._-]{0,127}$")
OUTPUT_PATH = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._/-]{0,200}$")
# A file or folder in the cluster's own HDFS (no authority: never another cluster's NameNode).
HDFS_PATH = re.compile(r"^hdfs:///[A-Za-z0-9_][A-Za-z0-9._/-]{0,200}$")
MAX_ARGS = 200
MAX_ARG_CHARS = 4096


class JobRefused(Exception):
    """The job cannot be submitted or changed; the message says why, `field` names the input
    at fault (empty: the cluster's or the job's state)."""

    status = 409

    def __init__(self, message: str, field: str = "") -> None:
        super().__init__(message)
        self.field = field
        if field and self.status == JobRefused.status:  # bad input, not a state
            self.status = 400


class UploadTooLarge(JobRefused):
    """An uploaded file, or all of them together, over the cap the message names."""

    status = 413


@dataclass
class Upload:
    role: str  # JobFile.Role
    name: str
    content: bytes


@dataclass
class JobRequest:
    """What a user asks to run, from any front door (API, web form, CLI)."""

    kind: str
    main: str = ""  # a path in the master container when no main file is uploaded
    main_class: str = ""
    args: list[str] = field(default_factory=list)
    properties: dict[str, str] = field(default_factory=dict)
    output_path: str = ""
    uploads: list[Upload] = field(default_factory=list)


def size_words(size: int) -> str:
    return f"{size / 1024 / 1024:.0f} MiB" if size >= 1024 * 1024 else f"{size} bytes"


def check_upload_sizes(sizes: dict[str, int]) -> None:
    """UploadTooLarge naming the file and the cap, before anything is read into memory."""
    per_file, per_job = settings.JOB_FILE_MAX_BYTES, settings.JOB_UPLOAD_MAX_BYTES
    for name, size in sizes.items():
        if size > per_file:
            raise UploadTooLarge(
                f"{name} is {size} bytes; the cap per file is {size_words(per_file)}", "files"
            )
    if sum(sizes.values()) > per_job:
        raise UploadTooLarge(
            f"the files total {sum(sizes.values())} bytes; the cap per job is "
            f"{size_words(per_job)}",
            "files",
        )


def uploads_held(user: Any) -> int:
    """Bytes of the uploads of the user's jobs not yet ended (those of ended jobs are gone)."""
    held = JobFile.objects.filter(job__owner=user, job__state__in=LIVE).aggregate(n=Sum("size"))
    return held["n"] or 0


def _check_storage(user: Any, adding: int) -> None:
    """UploadTooLarge when the user's queued and running jobs would hold more uploads than
    JOB_UPLOADS_PER_USER_MAX_BYTES; called under the user's row lock, so parallel submits
    cannot both pass."""
    cap, held = settings.JOB_UPLOADS_PER_USER_MAX_BYTES, uploads_held(user)
    if adding and held + adding > cap:
        raise UploadTooLarge(
            f"your queued and running jobs hold {size_words(held)} of uploads and this job's "
            f"files add {size_words(adding)}; the cap per user is {size_words(cap)} (uploads "
            "leave when their job ends: wait for one, or cancel one)",
            "files",
        )


def _check_cluster(cluster: Cluster, kind: str) -> None:
    if cluster.state != Cluster.State.RUNNING:
        why = f" ({cluster.reason})" if cluster.reason else ""
        raise JobRefused(
            f"cluster {cluster.name} is {cluster.state}{why}; jobs run only on a running cluster"
        )
    product = cluster.version.product.name
    kinds = job_kinds(cluster)
    if not kinds:
        raise JobRefused(f"cluster {cluster.name} runs {product}, whose version runs no jobs")
    if kind not in kinds:
        allowed = ", ".join(str(k) for k in kinds)
        raise JobRefused(f"a {product} cluster runs {allowed} jobs, not {kind}", "kind")


def job_kinds(cluster: Cluster) -> tuple[str, ...]:
    """The kinds of job the cluster's version runs (its plugin's; none: no Jobs form)."""
    return plugin_for(cluster.definition).job_kinds


def _check_request(asked: JobRequest) -> None:
    if asked.kind not in K.values:
        raise JobRefused(f"unknown kind {asked.kind!r}: one of {', '.join(K.values)}", "kind")
    names = [u.name for u in asked.uploads]
    for name in names:
        if not FILE_NAME.match(name):
            raise JobRefused(
                f"file name {name!r}: letters, digits, '.', '_' and '-' only, at most 128",
                "files",
            )
    if len(set(names)) != len(names):
        raise JobRefused("two uploaded files have the same name", "files")
    check_upload_sizes({u.name: len(u.content) for u in asked.uploads})
    mains = [u for u in asked.uploads if u.role == JobFile.Role.MAIN]
    if len(mains) > 1:
        raise JobRefused("one main file per job", "main")
    main = mains[0].name if mains else asked.main
    if not main:
        raise JobRefused("upload the main file, or name one in the container", "main")
    if not mains and in_hdfs(main):
        _check_hdfs_path(asked.kind, main, "main")
    elif not mains and not main.startswith("/"):
        raise JobRefused(f"{main!r}: upload it, give an absolute path or an hdfs:/// one", "main")
    suffix = ".py" if asked.kind == K.PYSPARK else ".jar"
    if not main.endswith(suffix):
        raise JobRefused(f"a {asked.kind} job's main file ends with {suffix}", "main")
    if asked.kind == K.SPARK_JAR and not asked.main_class:
        raise JobRefused("a spark-jar job names its main class", "main_class")
    if asked.kind != K.PYSPARK and any(u.role == JobFile.Role.PY_FILE for u in asked.uploads):
        raise JobRefused("--py-files are for pyspark jobs", "py_files")
    if len(asked.args) > MAX_ARGS or any(len(a) > MAX_ARG_CHARS for a in asked.args):
        raise JobRefused(f"at most {MAX_ARGS} arguments of {MAX_ARG_CHARS} characters", "args")
    for key, value in asked.properties.items():
        if not PROPERTY.match(key) or "\n" in str(value) or "\x00" in str(value):
            raise JobRefused(f"property {key!r}: a name like spark.executor.memory", "properties")
    out = asked.output_path
    if out and in_hdfs(out):
        _check_hdfs_path(asked.kind, out, "output")
    elif out and (not OUTPUT_PATH.match(out) or ".." in out.split("/")):
        raise JobRefused(
            f"output path {out!r}: a relative path within the job's folder, or an hdfs:/// one",
            "output",
        )


def in_hdfs(path: str) -> bool:
    return path.startswith("hdfs:")


def _check_hdfs_path(kind: str, path: str, field: str) -> None:
    """HDFS is the Hadoop product's: a MapReduce job reads its jar from it and writes its
    output to it; Spark clusters here have none."""
    if kind != K.MAPREDUCE:
        raise JobRefused(f"{path!r}: only Hadoop clusters have HDFS; upload the file", field)
    if not HDFS_PATH.match(path) or ".." in path.split("/"):
        raise JobRefused(
            f"{path!r}: an absolute path in the cluster's own HDFS, like hdfs:///user/me/out "
            "(letters, digits, '.', '_', '-' and '/')",
            field,
        )


def submit(user: Any, cluster: Cluster, asked: JobRequest, *, actor: Actor = None) -> Job:
    """A queued job on the cluster with its files, audited, and admitted when a job slot is
    free for it (a worker runs it once this commits; otherwise it waits, its reason saying
    why). JobRefused (or UploadTooLarge) saying why not."""
    _check_request(asked)
    main = next((u.name for u in asked.uploads if u.role == JobFile.Role.MAIN), asked.main)
    with transaction.atomic():
        # The user's row is the lock of their uploads' cap (no key: rows that refer to the
        # user are still written meanwhile).
        get_user_model().objects.select_for_update(no_key=True).filter(id=user.id).first()
        _check_storage(user, sum(len(u.content) for u in asked.uploads))
        # Its row only: with the product's too, every submit of a product waits on the others.
        locked = Cluster.objects.select_for_update(of=("self",)).select_related("version__product")
        _check_cluster(locked.get(id=cluster.id), asked.kind)
        job = Job.objects.create(
            cluster=cluster,
            owner=user,
            kind=asked.kind,
            main=main,
            main_class=asked.main_class,
            args=[str(a) for a in asked.args],
            py_files=[u.name for u in asked.uploads if u.role == JobFile.Role.PY_FILE],
            files=[u.name for u in asked.uploads if u.role == JobFile.Role.FILE],
            properties={k: str(v) for k, v in asked.properties.items()},
            output_path=asked.output_path,
        )
        JobFile.objects.bulk_create(
            JobFile(job=job, role=u.role, name=u.name, size=len(u.content), content=u.content)
            for u in asked.uploads
        )
        record(
            AuditEvent.Action.JOB_SUBMIT,
            actor if actor is not None else user,
            job,
            object_repr=f"job {job.id} on {cluster.name}",
            kind=job.kind,
            main=main,
            files=len(asked.uploads),
        )
        admission.admit()
    job.refresh_from_db(fields=["admitted", "reason"])
    return job


def cancel(job_id: int, *, actor: Actor = None) -> Job:
    """Kill a job: a queued one ends killed at once; a running one is marked, and its worker
    kills the application and ends it killed. JobRefused when it has already ended."""
    with transaction.atomic():
        job = Job.objects.select_for_update().select_related("cluster").get(id=job_id)
        if job.state in ENDED:
            raise JobRefused(f"job {job.id} already {job.state}")
        if job.state == J.QUEUED:
            job.state, job.ended, job.reason = J.KILLED, timezone.now(), "cancelled before it ran"
            job.save(update_fields=["state", "ended", "reason"])
            _ended(job.uploads.all())
        elif not job.cancel_requested:
            job.cancel_requested = True
            job.save(update_fields=["cancel_requested"])
        else:
            return job  # asked twice: audited once
        record(
            AuditEvent.Action.JOB_CANCEL,
            actor,
            job,
            object_repr=f"job {job.id} on {job.cluster.name}",
            was=J.QUEUED if job.state == J.KILLED else J.RUNNING,
        )
    return job


# A cluster moving into these states ends its queued and running jobs as failed.
JOBS_END_IN = frozenset(
    {State.STOPPING, State.STOPPED, State.FAILED, State.DESTROYING, State.DESTROYED}
)


def on_cluster_moved(sender: object, cluster_id: int, to: str, reason: str, **_: object) -> None:
    """transitions.cluster_moved's receiver (connected in apps.py): its jobs cannot go on."""
    if to in JOBS_END_IN:
        end_live_jobs(cluster_id, f"the cluster is {to}" + (f": {reason}" if reason else ""))


def end_live_jobs(cluster_id: int, reason: str) -> int:
    """The cluster stops, fails or goes away: its queued and running jobs end failed with the
    reason (their workers see it and stop following). Returns how many."""
    ended = Job.objects.filter(cluster_id=cluster_id, state__in=LIVE).update(
        state=J.FAILED, reason=reason, ended=timezone.now()
    )
    _ended(JobFile.objects.filter(job__cluster_id=cluster_id))
    return ended


def start(job_id: int) -> datetime | None:
    """queued -> running, with the first heartbeat of its follower; returns that instant (the
    job's `started`, and the follower's lease: see followed), or None when the job was
    cancelled or ended meanwhile."""
    now = timezone.now()
    moved = Job.objects.filter(id=job_id, state=J.QUEUED).update(
        state=J.RUNNING, started=now, followed_at=now
    )
    return now if moved == 1 else None


def finish(job_id: int, state: str, exit_code: int | None, reason: str = "") -> bool:
    """running (or queued, for one that could not start) -> an end state; False when
    something else ended it first (a cancel before it ran, its cluster stopping)."""
    moved = Job.objects.filter(id=job_id, state__in=LIVE).update(
        state=state, exit_code=exit_code, reason=reason, ended=timezone.now()
    )
    if moved:
        _ended(JobFile.objects.filter(job_id=job_id))
    return moved == 1


def _ended(uploads: QuerySet[JobFile]) -> None:
    """Jobs ended: their uploads (of these, those of ended jobs) leave the database, as they
    were copied into the container when the job started; their slots go to waiting jobs once
    this commits."""
    uploads.filter(job__state__in=ENDED).delete()
    admission.admit_after_commit()


def append_log(job_id: int, text: str) -> None:
    """Add output to the job's log, keeping its last JOB_LOG_MAX_CHARS characters (log_start
    counts those dropped), in one statement."""
    if not text:
        return
    cap = settings.JOB_LOG_MAX_CHARS
    with connection.cursor() as cursor:
        cursor.execute(
            """UPDATE jobs_job SET
                 log_start = log_start + GREATEST(0, length(log) + length(%(text)s) - %(cap)s),
                 log = right(log || %(text)s, %(cap)s)
               WHERE id = %(job)s""",
            {"text": text, "cap": cap, "job": job_id},
        )


def set_application_id(job_id: int, application_id: str) -> None:
    Job.objects.filter(id=job_id, application_id="").update(application_id=application_id)


# ------------------------------------------------------------------ following a running job
# The worker that started a job follows it (workers/jobs.py), writing a heartbeat on every
# poll. The heartbeat is its lease: each of its writes holds only while followed_at is still
# the instant it wrote last. A worker that dies leaves the job with a stale heartbeat; beat's
# adopt_lost_jobs claims such a job (a conditional UPDATE of followed_at, the new lease) and
# hands it to another follower, which goes on from the exec and the .log offset on the row. A
# follower that was only slow finds its lease taken at its next write and stops there.


def record_exec(job_id: int, exec_id: str, lease: datetime) -> bool:
    """Note the exec running the job's program, for a follower that takes over; False when
    the lease was lost meanwhile."""
    return Job.objects.filter(id=job_id, followed_at=lease).update(exec_id=exec_id) == 1


def followed(
    job_id: int, lease: datetime, text: str = "", offset: int | None = None
) -> datetime | None:
    """A poll of the job's follower: its heartbeat, with the output read since the last one
    appended to the log (as append_log) and the byte offset in the .log file that output ends
    at, all in one statement: a follower lost between two polls leaves no line twice and none
    missing. Returns the new lease, or None when another follower holds the job now (nothing
    is written then)."""
    now = timezone.now()
    if not text:  # the log (up to a megabyte) is rewritten only when it grows
        moved = {} if offset is None else {"log_offset": offset}
        held = Job.objects.filter(id=job_id, followed_at=lease).update(followed_at=now, **moved)
        return now if held == 1 else None
    with connection.cursor() as cursor:
        cursor.execute(
            """UPDATE jobs_job SET
                 followed_at = %(now)s,
                 log_offset = COALESCE(%(offset)s, log_offset),
                 log_start = log_start + GREATEST(0, length(log) + length(%(text)s) - %(cap)s),
                 log = right(log || %(text)s, %(cap)s)
               WHERE id = %(job)s AND followed_at = %(lease)s""",
            {
                "now": now,
                "offset": offset,
                "text": text,
                "cap": settings.JOB_LOG_MAX_CHARS,
                "job": job_id,
                "lease": lease,
            },
        )
        return now if cursor.rowcount == 1 else None


def _lost(cutoff: datetime) -> Q:
    """Running, and its follower's last heartbeat is older than the cutoff (none: a job
    started before followers beat, by a worker long gone)."""
    return Q(state=J.RUNNING) & (
        Q(followed_at__lt=cutoff) | Q(followed_at__isnull=True, started__lt=cutoff)
    )


def lost_jobs(cutoff: datetime) -> list[int]:
    return list(Job.objects.filter(_lost(cutoff)).order_by("id").values_list("id", flat=True))


def claim(job_id: int, cutoff: datetime) -> datetime | None:
    """Take a lost job for a new follower: the lease, or None when the job is no longer lost
    (its follower beat, another pass claimed it, it ended). Postgres re-checks the condition
    on the row another UPDATE just changed, so of two claims at once one wins."""
    now = timezone.now()
    moved = Job.objects.filter(_lost(cutoff), id=job_id).update(followed_at=now)
    return now if moved == 1 else None


def adopt_lost_jobs(older_than: float | None = None) -> list[int]:
    """Beat's pass: each running job whose follower has not beaten for
    JOB_FOLLOWER_LOST_SECONDS (its worker died or was restarted) is claimed and handed to a
    new follower (FOLLOW, with the lease). Returns the ids handed out."""
    seconds = settings.JOB_FOLLOWER_LOST_SECONDS if older_than is None else older_than
    cutoff = timezone.now() - timedelta(seconds=seconds)
    adopted = []
    for job_id in lost_jobs(cutoff):
        lease = claim(job_id, cutoff)
        if lease is None:
            continue
        log.warning(
            "job %s: no heartbeat for over %.0f s; another worker follows it", job_id, seconds
        )
        bus.dispatch(FOLLOW, job_id, lease.isoformat())
        adopted.append(job_id)
    return adopted


@dataclass
class LogPart:
    text: str
    next: int  # the position to ask from next time
    dropped: int  # characters before `position` no longer kept (over the cap)


def log_since(job: Job, position: int = 0) -> LogPart:
    """The log from character `position` on (0: all that is kept)."""
    start = max(position, job.log_start)
    text = job.log[start - job.log_start :]
    return LogPart(text, job.log_start + len(job.log), max(0, job.log_start - position))


def log_cap_note() -> str:
    return f"the log keeps the last {settings.JOB_LOG_MAX_CHARS} characters"
