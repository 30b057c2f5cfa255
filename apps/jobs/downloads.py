"""A job's output file as an HTTP answer, for the job page and the API alike: streamed as the
node sends it (on the event loop under ASGI), cut at JOB_RESULT_MAX_BYTES, saved under its
own name whatever characters the job gave it, holding one of the user's node-call slots from
the first node call to the body's end."""

from django.conf import settings
from django.http import StreamingHttpResponse
from django.utils.http import content_disposition_header

from portal import streams

from . import results
from .models import Job
from .results import Download


def output_response(job: Job, name: str, user_id: int) -> StreamingHttpResponse:
    """The output file `name` of the job as an answer (results.read_output's errors, and
    TooManyNodeCalls before any node is asked when the user has the most node calls in
    flight). The slot goes with the body: a slow reader holds the user's share, no more."""
    with streams.node_call(user_id, "job output") as slot:
        answer = response(results.read_output(job, name), slot)
        slot.handed_over = True
    return answer


def response(download: Download, slot: streams.Slot | None = None) -> StreamingHttpResponse:
    """The file's first `length` bytes; X-Output-Size is its whole size (more than the
    Content-Length when the cap, X-Output-Cap, cut it)."""
    # Under ASGI Django would read a blocking iterator to its end before sending a byte:
    # in_thread hands it over one chunk at a time.
    body = streams.in_thread(download.chunks)
    if slot is not None:  # released when the body ends or the reader leaves; no deadline
        body = streams.held(slot, body, deadline=None)
    answer = StreamingHttpResponse(body, content_type="application/octet-stream")
    answer["Content-Length"] = str(download.length)
    answer["Content-Disposition"] = content_disposition_header(True, download.name)
    answer["X-Output-Size"] = str(download.size)
    answer["X-Output-Cap"] = str(settings.JOB_RESULT_MAX_BYTES)
    answer["Cache-Control"] = "no-store"
    return answer
