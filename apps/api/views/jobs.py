"""The jobs API: /clusters/<id>/jobs (list, submit), /jobs, /jobs/<id>, its log (followed
with ?follow=true), its cancel and its output. Others' jobs answer 404, as their clusters do;
read-only tokens read (apps.tokens.authentication refuses them anything else)."""

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import close_old_connections, connection
from django.db.models import QuerySet
from django.http import HttpResponse, HttpResponseBase
from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import mixins, renderers, status
from rest_framework.decorators import action
from rest_framework.generics import GenericAPIView
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.viewsets import GenericViewSet

from apps.accounts.requests import signed_in_user
from apps.jobs import downloads, results, services
from apps.jobs.models import Job, JobFile
from apps.jobs.services import JobRefused, JobRequest, Upload
from apps.nodes import NodeError
from portal import streams

from ..errors import ApiError
from ..permissions import visible_clusters
from ..schema import ErrorSerializer
from ..serializers.jobs import (
    JobSerializer,
    JobSubmitSerializer,
    LogQuerySerializer,
    OutputsSerializer,
)
from .clusters import LOG_ERRORS, LOG_RENDERERS, TEXT, PlainTextRenderer, text_stream


class FileRenderer(renderers.BaseRenderer):
    """For clients that accept only a file's own type on a download: errors as their
    message, as PlainTextRenderer's (the file itself is sent as it is, never rendered)."""

    media_type = "application/octet-stream"
    format = "bin"
    charset = None

    def render(self, data, accepted_media_type=None, renderer_context=None) -> bytes:
        return PlainTextRenderer().render(data)


FILE = [renderers.JSONRenderer, FileRenderer]

REFUSALS = {
    400: OpenApiResponse(ErrorSerializer, "bad input, named in `fields`"),
    409: OpenApiResponse(ErrorSerializer, "the cluster is not running, or the job has ended"),
    413: OpenApiResponse(ErrorSerializer, "an upload over the cap the message names"),
}


def visible_jobs(user) -> QuerySet[Job]:
    """Jobs on the clusters the user may see (admins: all)."""
    jobs = Job.objects.select_related("cluster", "owner")
    return jobs.filter(cluster__in=visible_clusters(user))


def refused(error: JobRefused) -> ApiError:
    words = {400: "invalid", 409: "conflict", 413: "payload_too_large"}
    fields = {error.field: str(error)} if error.field and error.status == 400 else None
    extra = {"fields": fields} if fields else {}
    return ApiError(error.status, words[error.status], str(error), **extra)


def _properties(raw) -> dict[str, str]:
    if isinstance(raw, dict):
        return {str(k): str(v) for k, v in raw.items()}
    if not isinstance(raw, list):  # JSON's true, 3 or "x": neither an object nor a list
        raise JobRefused("properties is an object, or a list of key=value", "properties")
    pairs = {}
    for item in raw:
        key, sep, value = str(item).partition("=")
        if not sep:
            raise JobRefused(f"property {item!r}: write it key=value", "properties")
        pairs[key] = value
    return pairs


def job_request(request: Request) -> JobRequest:
    """The submit's fields, from a multipart form (repeated fields, files) or a JSON body."""
    data: Any = request.data  # a QueryDict (a form) or a dict (JSON)
    uploads = request.FILES
    many = data.getlist if hasattr(data, "getlist") else (lambda k: data.get(k) or [])
    files = [
        (role, f)
        for role, key in ((JobFile.Role.MAIN, "main"), (JobFile.Role.PY_FILE, "py_files"))
        for f in uploads.getlist(key)
    ] + [(JobFile.Role.FILE, f) for f in uploads.getlist("files")]
    services.check_upload_sizes({str(f.name): f.size or 0 for _, f in files})
    args = many("args")
    properties = data.get("properties") if isinstance(data.get("properties"), dict) else None
    if not isinstance(args, list):
        raise JobRefused("args is a list of strings", "args")
    return JobRequest(
        kind=str(data.get("kind", "")),
        main="" if "main" in uploads else str(data.get("main", "")),
        main_class=str(data.get("main_class", "")),
        args=[str(a) for a in args],
        properties=_properties(properties if properties is not None else many("properties")),
        output_path=str(data.get("output", "")),
        uploads=[Upload(role, str(f.name), f.read()) for role, f in files],
    )


class ClusterJobsView(GenericAPIView):
    """A cluster's jobs, newest first; POST submits one (multipart, with its files)."""

    serializer_class = JobSerializer

    def get_queryset(self) -> QuerySet[Job]:
        if getattr(self, "swagger_fake_view", False):
            return Job.objects.none()
        return visible_jobs(self.request.user).filter(cluster=self._cluster())

    def _cluster(self):
        return get_object_or_404(visible_clusters(self.request.user), id=self.kwargs["cluster_id"])

    @extend_schema(responses={200: JobSerializer(many=True)})  # a page of them, not one
    def get(self, request: Request, cluster_id: int) -> Response:
        page = self.paginate_queryset(self.get_queryset())
        return self.get_paginated_response(self.get_serializer(page, many=True).data)

    @extend_schema(
        request={
            "multipart/form-data": JobSubmitSerializer,
            "application/json": JobSubmitSerializer,
        },
        responses={202: JobSerializer, **REFUSALS},
    )
    def post(self, request: Request, cluster_id: int) -> Response:
        cluster = self._cluster()
        try:
            job = services.submit(signed_in_user(request), cluster, job_request(request))
        except JobRefused as error:
            raise refused(error) from None
        data = JobSerializer(job, context={"request": request}).data
        return Response(data, status=status.HTTP_202_ACCEPTED, headers={"Location": data["url"]})


class JobViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, GenericViewSet):
    """Your jobs on all your clusters, newest first (admins: everyone's)."""

    serializer_class = JobSerializer
    lookup_value_regex = r"\d+"

    def get_queryset(self) -> QuerySet[Job]:
        if getattr(self, "swagger_fake_view", False):
            return Job.objects.none()
        return visible_jobs(self.request.user)

    @extend_schema(request=None, responses={202: JobSerializer, 409: REFUSALS[409]})
    @action(detail=True, methods=["post"])
    def cancel(self, request: Request, pk: str) -> Response:
        """Kill the job: a queued one at once, a running one's application by its worker."""
        job = self.get_object()
        try:
            job = services.cancel(job.id, actor=request.user)
        except JobRefused as error:
            raise refused(error) from None
        data = JobSerializer(job, context={"request": request}).data
        return Response(data, status=status.HTTP_202_ACCEPTED)

    @extend_schema(
        parameters=[LogQuerySerializer],
        responses={(200, "text/plain"): OpenApiTypes.STR, 429: LOG_ERRORS[429]},
    )
    @action(detail=True, methods=["get"], renderer_classes=LOG_RENDERERS)
    def log(self, request: Request, pk: str) -> HttpResponseBase:
        """The driver's output as text/plain from character `since` on; X-Log-Next is where
        to go on from. follow=true streams new output as it comes until the job ends or
        `seconds` pass (at most PLATTER_STREAM_FOLLOW_SECONDS): ask again from `since` plus
        the characters received to go on. 429 when you already have the most streams open
        (PLATTER_STREAMS_PER_USER, named in the answer). The log keeps its last
        JOB_LOG_MAX_CHARS characters (X-Log-Cap); X-Log-Dropped counts those asked for but
        no longer kept."""
        job = self.get_object()
        query = LogQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        asked = query.validated_data
        response: HttpResponseBase
        if asked["follow"]:
            # As a cluster's log follow: 429 before any byte, then the slot is held while it
            # streams on the event loop, which no thread waits on, until the deadline.
            slot = streams.claim(signed_in_user(request).id, "logs")
            deadline = min(asked["seconds"], settings.STREAM_FOLLOW_SECONDS)
            response = text_stream(
                streams.held(slot, follow(job.id, asked["since"]), deadline=deadline)
            )
        else:
            part = services.log_since(job, asked["since"])
            response = HttpResponse(part.text, content_type=TEXT)
            response["X-Log-Next"] = str(part.next)
            response["X-Log-Dropped"] = str(part.dropped)
            response["X-Job-State"] = job.state
        response["X-Log-Cap"] = str(settings.JOB_LOG_MAX_CHARS)
        return response

    @extend_schema(responses={200: OutputsSerializer, 409: REFUSALS[409]})
    @action(detail=True, methods=["get"])
    def outputs(self, request: Request, pk: str) -> Response:
        """The files under the job's output path, in the cluster's master container. 429 when
        you already have the most node calls in flight (PLATTER_NODE_CALLS_PER_USER)."""
        job = self.get_object()
        try:
            with streams.node_call(signed_in_user(request).id, "job outputs"):
                found = results.list_outputs(job)
        except results.NoResult as error:
            raise ApiError(409, "no_output", str(error)) from None
        except NodeError as error:
            raise ApiError(503, "node_unavailable", str(error)) from None
        return Response(OutputsSerializer({"path": job.output_path, "files": found}).data)

    @extend_schema(
        operation_id="jobs_output_file",
        responses={
            (200, "application/octet-stream"): OpenApiTypes.BINARY,
            409: OpenApiResponse(ErrorSerializer, "a folder, a symbolic link or a pattern"),
        },
    )
    @action(detail=True, methods=["get"], url_path=r"outputs/(?P<name>.+)", renderer_classes=FILE)
    def output(self, request: Request, pk: str, name: str) -> HttpResponseBase:
        """One regular file of the output, streamed: its first JOB_RESULT_MAX_BYTES bytes
        (X-Output-Cap); X-Output-Size is its whole size, more than the Content-Length when it
        was cut. 409 `not_a_file` for a folder, a symbolic link (or a name with one on its
        way) or an HDFS pattern. A download counts among your node calls until it ends: 429
        over PLATTER_NODE_CALLS_PER_USER."""
        job = self.get_object()
        try:
            return downloads.output_response(job, name, signed_in_user(request).id)
        except results.NoResult as error:
            raise ApiError(404, "not_found", str(error)) from None
        except results.NotDownloadable as error:
            raise ApiError(409, "not_a_file", str(error)) from None
        except NodeError as error:
            raise ApiError(503, "node_unavailable", str(error)) from None


async def follow(job_id: int, since: int) -> AsyncIterator[str]:
    """The log from `since`, then each new part as the worker stores it, until the job ends
    (the caller's deadline ends it sooner). Each look at the row is a short query in the
    request's thread; the waits between looks are on the event loop."""
    position = since
    while True:
        job = await sync_to_async(_look)(job_id)
        part = services.log_since(job, position)
        if part.dropped:
            yield f"[platter: {part.dropped} characters not kept; {services.log_cap_note()}]\n"
        if part.text:
            yield part.text
        position = part.next
        if job.done:
            return
        await asyncio.sleep(settings.JOB_POLL_SECONDS)


def _look(job_id: int) -> Job:
    try:
        return Job.objects.only("state", "log", "log_start").get(id=job_id)
    finally:
        # A follow lasts minutes: between looks its connection goes as at a request's end
        # (CONN_MAX_AGE). Not inside a transaction (a test's), which it would break.
        if not connection.in_atomic_block:
            close_old_connections()
