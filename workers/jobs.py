"""Running a job (apps.jobs) in its cluster's master container.

The files go in with one copy, the program starts as a detached exec, and this worker then
follows it: every JOB_POLL_SECONDS it reads what the program wrote since the last read and
appends it to the job's log in the database (where followers read it: a line is there within
one poll of being written), picks the application id out of it, carries out a cancel, and
ends the job from the program's exit code. A job that something else ended meanwhile (its
cluster stopped or failed) is left alone: the containers are going away.

Following survives the worker: the exec's id, the .log offset reached and a heartbeat are on
the job's row (apps.jobs.services, "following a running job"). When a worker dies, beat's
adopt_lost_jobs hands the job to resume_job in another, which goes on from there.
"""

import codecs
import logging
import time
from datetime import datetime, timedelta

from django.conf import settings
from django.utils import timezone

from apps.jobs import commands, services
from apps.jobs.models import Job
from apps.jobs.results import NoResult, master_of
from apps.nodes import NodeClient, NodeError, NodeMissing

log = logging.getLogger(__name__)
J = Job.State
READ_BYTES = 256 * 1024  # per poll: a chatty driver is read in parts, never all at once
NODE_SLIPS = 10  # polls in a row a node may miss before the job fails
LINE_KEPT = 4096  # of an unfinished last line, kept to find an application id cut in two
TAKEN_OVER = "followed by another worker"
NOT_ADMITTED = "waiting for a job slot"
GONE = (
    "the job's program is gone from its container: the cluster's master container (or Docker "
    "on its node) restarted while it ran. The log has its output up to then; submit it again"
)
LOST_AT_START = (
    "the worker starting this job stopped before it could follow it; submit the job again"
)


def run_job(job_id: int) -> str:
    """Run the job to its end; returns the state it is left in."""
    job = Job.objects.select_related("cluster").filter(id=job_id).first()
    if job is None or job.state != J.QUEUED:
        return job.state if job else "gone"
    if job.admitted is None:  # sent by hand: it runs when admission gives it a slot
        return NOT_ADMITTED
    try:
        client, container = master_of(job.cluster)
        files = {f.name: bytes(f.content) for f in job.uploads.all()}
        client.put_files(container, commands.folder(job), files)
        lease = services.start(job.id)
        if lease is None:
            return Job.objects.get(id=job_id).state  # cancelled or its cluster stopped
        job.started = lease  # start() stamps both with the same instant
        exec_id = client.start_exec(
            container, commands.launcher(job), environment=commands.environment(job)
        )
    except (NodeError, NoResult) as error:
        services.finish(job.id, J.FAILED, None, f"could not start the job: {error}")
        return J.FAILED
    if not services.record_exec(job.id, exec_id, lease):
        return TAKEN_OVER  # a pass took it as lost before the exec was noted: it ends it
    return follow(job, client, container, exec_id, lease)


def resume_job(job_id: int, claimed: str) -> str:
    """Follow a running job whose follower was lost, from where that one stopped; `claimed`
    is the lease adopt_lost_jobs took it with (ISO 8601)."""
    job = Job.objects.select_related("cluster").filter(id=job_id).first()
    if job is None:
        return "gone"
    lease = datetime.fromisoformat(claimed)
    if job.state != J.RUNNING:
        return job.state
    if job.followed_at != lease:
        return TAKEN_OVER  # a later pass claimed it again (this task waited too long)
    try:
        client, container = master_of(job.cluster)
    except NoResult as error:
        services.finish(job.id, J.FAILED, None, f"lost the job's container: {error}")
        return J.FAILED
    if not job.exec_id:
        # Lost between starting the program and noting its exec: stop what may have started.
        _kill(job, client, container)
        services.finish(job.id, J.FAILED, None, LOST_AT_START)
        return J.FAILED
    log.info("job %s: following it on from byte %s of its log", job.id, job.log_offset)
    return follow(job, client, container, job.exec_id, lease, job.log_offset)


def follow(
    job: Job, client: NodeClient, container: str, exec_id: str, lease: datetime, offset: int = 0
) -> str:
    """Copy the program's output into the job's log, from byte `offset` of its .log file,
    until it exits; end the job. Stops, leaving the job as it is, when another follower took
    the lease."""
    log_file = f"{commands.folder(job)}/{commands.LOG}"
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    slips, killing, partial = 0, False, ""
    started = job.started or timezone.now()
    deadline = started + timedelta(seconds=settings.JOB_MAX_SECONDS)
    while True:
        held: datetime | None = lease
        code: int | None = None
        try:
            code = client.exec_status(exec_id)
            while chunk := client.read_file(container, log_file, offset, READ_BYTES):
                offset += len(chunk)
                # The bytes of a character cut at the chunk's end stay with the decoder: the
                # offset saved is where the decoded text ends, so a new follower reads them.
                text = decoder.decode(chunk)
                held = _record(job, held, text, offset - len(decoder.getstate()[0]))
                partial = _find_application_id(job, partial, text)
                if held is None or len(chunk) < READ_BYTES:
                    break
            slips = 0
        except NodeMissing as error:  # the exec (or the container) is unknown to the node
            log.warning("job %s: %s", job.id, error)
            services.finish(job.id, J.FAILED, None, GONE)
            return J.FAILED
        except (NodeError, TimeoutError) as error:
            slips += 1
            if slips >= NODE_SLIPS:
                services.finish(job.id, J.FAILED, None, f"lost the job's container: {error}")
                return J.FAILED
        if held is lease:  # nothing written this poll: the heartbeat alone
            held = services.followed(job.id, lease)
        if held is None:
            return TAKEN_OVER
        lease = held
        if slips:
            _pause()
            continue
        fresh = Job.objects.filter(id=job.id).values("state", "cancel_requested").first()
        if fresh is None or fresh["state"] != J.RUNNING:
            return fresh["state"] if fresh else "gone"  # ended by its cluster's stop or failure
        if code is not None:
            text = decoder.decode(b"", final=True)
            if _record(job, lease, text, offset) is None:
                return TAKEN_OVER
            _find_application_id(job, partial, text, final=True)
            return _end(job, code, fresh["cancel_requested"] or killing)
        timed_out = timezone.now() > deadline
        if (fresh["cancel_requested"] or timed_out) and not killing:
            killing = True
            if timed_out:
                services.append_log(job.id, "\n[platter] over JOB_MAX_SECONDS: killing\n")
            _kill(job, client, container)
        _pause()


def _pause() -> None:
    time.sleep(settings.JOB_POLL_SECONDS)


def _record(job: Job, lease: datetime | None, text: str, offset: int) -> datetime | None:
    """Append the text and the offset it ends at, under the lease; the new lease, or None."""
    return None if lease is None else services.followed(job.id, lease, text, offset)


def _find_application_id(job: Job, partial: str, text: str, final: bool = False) -> str:
    """Note the application id from the whole lines `text` completes after `partial` (an id
    cut between two reads is found once its line is whole, never cut short); returns the new
    unfinished last line."""
    if job.application_id:
        return ""
    lines, _, rest = (partial + text).rpartition("\n")
    if final:
        lines, rest = partial + text, ""
    if found := commands.application_id(lines, commands.plugin_of(job)):
        job.application_id = found
        services.set_application_id(job.id, found)
    return rest[-LINE_KEPT:]


def _kill(job: Job, client: NodeClient, container: str) -> None:
    job.refresh_from_db(fields=["application_id"])
    try:
        _code, output = client.exec(container, commands.kill(job), timeout=60)
    except (NodeError, TimeoutError) as error:
        log.warning("job %s: the kill failed: %s", job.id, error)
        return
    if output.strip():
        services.append_log(job.id, f"\n[platter] cancel: {output.strip()}\n")


def _end(job: Job, code: int, cancelled: bool) -> str:
    if cancelled:
        services.finish(job.id, J.KILLED, code, "cancelled")
        return J.KILLED
    if code == 0:
        services.finish(job.id, J.SUCCEEDED, 0)
        return J.SUCCEEDED
    services.finish(job.id, J.FAILED, code, f"the program exited with code {code}")
    return J.FAILED
