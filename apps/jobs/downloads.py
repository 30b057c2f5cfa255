"""A job's output file as an HTTP answer, for the job page and the API alike: streamed as the
node sends it (on the event loop under ASGI), cut at JOB_RESULT_MAX_BYTES, saved under its
own name whatever characters the job gave it."""

from django.conf import settings
from django.http import StreamingHttpResponse
from django.utils.http import content_disposition_header

from portal import streams

from .results import Download


def response(download: Download) -> StreamingHttpResponse:
    """The file's first `length` bytes; X-Output-Size is its whole size (more than the
    Content-Length when the cap, X-Output-Cap, cut it)."""
    # Under ASGI Django would read a blocking iterator to its end before sending a byte:
    # in_thread hands it over one chunk at a time.
    answer = StreamingHttpResponse(
        streams.in_thread(download.chunks), content_type="application/octet-stream"
    )
    answer["Content-Length"] = str(download.length)
    answer["Content-Disposition"] = content_disposition_header(True, download.name)
    answer["X-Output-Size"] = str(download.size)
    answer["X-Output-Cap"] = str(settings.JOB_RESULT_MAX_BYTES)
    answer["Cache-Control"] = "no-store"
    return answer
