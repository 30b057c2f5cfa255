"""Running a job (apps.jobs) in its cluster's master container.

The files go in with one copy, the program starts as a detached exec, and this worker then
follows it: every JOB_POLL_SECONDS it reads what the program wrote since the last read and
appends it to the job's log in the database (where followers read it: a line is there within
one poll of being written), picks the application id out of it, carries out a cancel, and
ends the job from the program's exit code. A job that something else ended meanwhile (its
cluster stopped or failed) is left alone: the containers are going away.
"""

import codecs
import logging
import time

from django.conf import settings

from apps.jobs import commands, services
from apps.jobs.models import Job
from apps.jobs.results import NoResult, master_of
from apps.nodes import NodeClient, NodeError

log = logging.getLogger(__name__)
J = Job.State
READ_BYTES = 256 * 1024  # per poll: a chatty driver is read in parts, never all at once
NODE_SLIPS = 10  # polls in a row a node may miss before the job fails


def run_job(job_id: int) -> str:
    """Run the job to its end; returns the state it is left in."""
    job = Job.objects.select_related("cluster").filter(id=job_id).first()
    if job is None or job.state != J.QUEUED:
        return job.state if job else "gone"
    try:
        client, container = master_of(job.cluster)
        files = {f.name: bytes(f.content) for f in job.uploads.all()}
        client.put_files(container, commands.folder(job), files)
        if not services.start(job.id):
            return Job.objects.get(id=job_id).state  # cancelled or its cluster stopped
        exec_id = client.start_exec(
            container, commands.launcher(job), environment=commands.environment(job)
        )
    except (NodeError, NoResult) as error:
        services.finish(job.id, J.FAILED, None, f"could not start the job: {error}")
        return J.FAILED
    return follow(job, client, container, exec_id)


def follow(job: Job, client: NodeClient, container: str, exec_id: str) -> str:
    """Copy the program's output into the job's log until it exits; end the job."""
    log_file = f"{commands.folder(job)}/{commands.LOG}"
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    offset, slips, killing = 0, 0, False
    deadline = time.monotonic() + settings.JOB_MAX_SECONDS
    while True:
        try:
            code = client.exec_status(exec_id)
            while chunk := client.read_file(container, log_file, offset, READ_BYTES):
                offset += len(chunk)
                _record(job, decoder.decode(chunk))
                if len(chunk) < READ_BYTES:
                    break
            slips = 0
        except (NodeError, TimeoutError) as error:
            slips += 1
            if slips < NODE_SLIPS:
                time.sleep(settings.JOB_POLL_SECONDS)
                continue
            services.finish(job.id, J.FAILED, None, f"lost the job's container: {error}")
            return J.FAILED
        fresh = Job.objects.filter(id=job.id).values("state", "cancel_requested").first()
        if fresh is None or fresh["state"] != J.RUNNING:
            return fresh["state"] if fresh else "gone"  # ended by its cluster's stop or failure
        if code is not None:
            _record(job, decoder.decode(b"", final=True))
            return _end(job, code, fresh["cancel_requested"] or killing)
        timed_out = time.monotonic() > deadline
        if (fresh["cancel_requested"] or timed_out) and not killing:
            killing = True
            if timed_out:
                services.append_log(job.id, "\n[platter] over JOB_MAX_SECONDS: killing\n")
            _kill(job, client, container)
        time.sleep(settings.JOB_POLL_SECONDS)


def _record(job: Job, text: str) -> None:
    if not text:
        return
    services.append_log(job.id, text)
    if not job.application_id and (found := commands.application_id(text)):
        job.application_id = found
        services.set_application_id(job.id, found)


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
