from collections.abc import AsyncIterator, Iterator

from django.conf import settings
from django.db.models import Prefetch, QuerySet
from django.http import HttpResponse, HttpResponseBase, StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import mixins, renderers, serializers, status
from rest_framework.decorators import action
from rest_framework.filters import OrderingFilter
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.viewsets import GenericViewSet

from apps.accounts.requests import signed_in_user
from apps.clusters import autoscale, idle, logs, perimeter, services
from apps.clusters.models import Cluster, DiskAllocation, Instance
from apps.nodes import NodeError
from apps.usage import growth
from portal import streams

from .. import idempotency
from ..errors import ApiError
from ..filters import ClusterFilter, NamedFilterBackend
from ..launching import find_version, launch_from_body
from ..permissions import visible_clusters
from ..schema import ErrorSerializer
from ..serializers.clusters import (
    LIST_COLUMNS,
    AllowedSourcesSerializer,
    AutoscalingSerializer,
    ClusterCreateSerializer,
    ClusterDetailSerializer,
    ClusterSerializer,
    ExtendedSerializer,
    ExtendSerializer,
    IdleLimitSerializer,
    IdleStatusSerializer,
    PerimeterSerializer,
    ResizeSerializer,
    cluster_url,
    detail_dict,
    list_rows,
)
from ..serializers.progress import EventPageSerializer, EventQuerySerializer, LogQuerySerializer


def detail_queryset(base: QuerySet[Cluster] | None = None) -> QuerySet[Cluster]:
    """Clusters with everything the detail shows, in a fixed number of queries (pinned by
    apps/api/tests/test_cluster_query_counts.py): the serializer reads only these."""
    allocations = (
        DiskAllocation.objects.filter(active=True)
        .select_related("disk__node")
        # the order disks are mounted in (container_specs.py)
        .order_by("disk__mount_path", "disk_id")
    )
    instances = (
        Instance.objects.select_related("node", "address")
        .prefetch_related(
            Prefetch("allocations", queryset=allocations, to_attr="active_allocations")
        )
        # Instance's own order, but by the cluster's id: ordering by "cluster" sorts by the
        # cluster's ordering, which joined the clusters table to every instance (bench/api).
        .order_by("cluster_id", "role", "index")
    )
    return idle.with_group_limits(
        (base if base is not None else Cluster.objects.all())
        .select_related("owner", "version__product", "revision", "credentials", "scaling_policy")
        .prefetch_related(Prefetch("instances", queryset=instances), "events")
    )


class KeepDataSerializer(serializers.Serializer):
    keep_data = serializers.BooleanField(default=True)


class PlainTextRenderer(renderers.BaseRenderer):
    """For clients that accept only text/plain on the logs: errors as their message."""

    media_type = "text/plain"
    format = "txt"
    charset = "utf-8"

    def render(self, data, accepted_media_type=None, renderer_context=None) -> bytes:
        if isinstance(data, dict):
            fields = "".join(f"\n{k}: {v}" for k, v in (data.get("fields") or {}).items())
            data = f"{data.get('message', '')}{fields}\n"
        return str(data).encode()


LOG_RENDERERS = [renderers.JSONRenderer, PlainTextRenderer]
LOG_ERRORS = {
    409: OpenApiResponse(ErrorSerializer, "the instance has no container (yet, or any more)"),
    429: OpenApiResponse(ErrorSerializer, "follow: you have the most streams open (the limit)"),
    503: OpenApiResponse(ErrorSerializer, "the instance's node did not answer"),
}
TEXT = "text/plain; charset=utf-8"
IDEMPOTENCY_CONFLICT = OpenApiResponse(
    ErrorSerializer, "the Idempotency-Key was sent before with another request"
)


def text_stream(lines: Iterator[str] | AsyncIterator[str]) -> StreamingHttpResponse:
    """A text/plain stream. Under ASGI pass an async iterator (portal.streams.in_thread wraps
    a blocking one): Django reads a synchronous one to its end before sending a byte."""
    response = StreamingHttpResponse(lines, content_type=TEXT)
    response["Cache-Control"] = "no-store"
    response["X-Accel-Buffering"] = "no"  # a buffering proxy (nginx) would hold the lines back
    return response


class ClusterViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, GenericViewSet):
    """Your clusters (admins: everyone's). Also reachable as
    /clusters/<username>/<product>/<version>/<id>."""

    filterset_class = ClusterFilter
    filter_backends = [NamedFilterBackend, OrderingFilter]  # ?ordering=-created
    ordering_fields = ["id", "name", "state", "created", "expires_at"]
    lookup_value_regex = r"\d+"

    def get_queryset(self) -> QuerySet[Cluster]:
        if getattr(self, "swagger_fake_view", False):  # schema generation, no user
            return Cluster.objects.none()
        clusters = visible_clusters(self.request.user)
        if "username" in self.kwargs:  # the long form must name the cluster exactly
            clusters = clusters.filter(
                owner__username=self.kwargs["username"],
                version__product__name=self.kwargs["product"],
                version__version=self.kwargs["version"],
            )
        if self.action in ("list", "logs", "events", "allowed_sources"):  # list(): its columns
            return clusters
        return detail_queryset(clusters)

    def get_serializer_class(self):
        return ClusterSerializer if self.action == "list" else ClusterDetailSerializer

    def list(self, request: Request, *args, **kwargs) -> Response:
        """ListModelMixin's, reading only the columns a row shows (serializers.list_rows
        writes them as ClusterSerializer would)."""
        rows = self.filter_queryset(self.get_queryset()).values_list(*LIST_COLUMNS)
        page = self.paginate_queryset(rows)
        if page is None:
            return Response(list_rows(request, rows))
        return self.get_paginated_response(list_rows(request, page))

    def retrieve(self, request: Request, *args, **kwargs) -> Response:
        """RetrieveModelMixin's, with ClusterDetailSerializer's answer written by hand
        (serializers.detail_dict)."""
        return Response(detail_dict(request, self.get_object()))

    @extend_schema(
        request=ClusterCreateSerializer,
        parameters=[idempotency.PARAMETER],
        responses={202: ClusterDetailSerializer, 422: IDEMPOTENCY_CONFLICT},
    )
    def create(self, request: Request) -> Response:
        """Launch with the product and version named in the body (see products/…/…)."""
        return idempotency.once(request, lambda: self._launch(request))

    def _launch(self, request: Request) -> Response:
        body = request.data if isinstance(request.data, dict) else {}
        names = ClusterCreateSerializer(data=body, partial=True)
        names.is_valid(raise_exception=True)
        if not {"product", "version"} <= set(names.validated_data):
            raise serializers.ValidationError({"version": "name the product and the version"})
        version = find_version(names.validated_data["product"], names.validated_data["version"])
        if version is None:
            raise serializers.ValidationError({"version": "no launchable version with that name"})
        return accepted(request, launch_from_body(request.user, version, request.data))

    @extend_schema(
        parameters=[OpenApiParameter("keep_data", OpenApiTypes.BOOL, default=True)],
        request=None,
        responses={202: ClusterDetailSerializer},
    )
    def destroy(self, request: Request, **kwargs) -> Response:
        """Destroy; the disks keep their data for a later reuse unless ?keep_data=false."""
        query = KeepDataSerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        cluster = self.get_object()
        keep_data = query.validated_data["keep_data"]
        services.request_destroy(cluster.id, keep_data=keep_data, actor=request.user)
        return accepted(request, cluster)

    @extend_schema(request=None, responses={202: ClusterDetailSerializer})
    @action(detail=True, methods=["post"])
    def stop(self, request: Request, **kwargs) -> Response:
        cluster = self.get_object()
        services.request_stop(cluster.id, actor=request.user)
        return accepted(request, cluster)

    @extend_schema(request=None, responses={202: ClusterDetailSerializer})
    @action(detail=True, methods=["post"])
    def start(self, request: Request, **kwargs) -> Response:
        cluster = self.get_object()
        growth.request_start(cluster.id, actor=request.user)
        return accepted(request, cluster)

    @extend_schema(request=ResizeSerializer, responses={202: ClusterDetailSerializer})
    @action(detail=True, methods=["post"])
    def resize(self, request: Request, **kwargs) -> Response:
        """Grow or shrink a running cluster to `workers` instances of its scalable role, or
        give every instance of `role` new `cores` and/or `memory_mb` (cores change live; memory
        live or by a rolling restart, as the product allows); 400 naming why when it cannot be
        (bounds, HDFS replication, no room on an instance's node), 403 past a quota or budget,
        409 when it is not running."""
        cluster = self.get_object()
        asked = ResizeSerializer(data=request.data)
        asked.is_valid(raise_exception=True)
        wanted = asked.validated_data
        if "workers" in wanted:
            growth.request_resize(cluster.id, wanted["workers"], actor=request.user)
        else:
            growth.request_vertical_resize(
                cluster.id,
                wanted["role"],
                wanted.get("cores"),
                wanted.get("memory_mb"),
                actor=request.user,
            )
        return accepted(request, cluster)

    @extend_schema(
        request=None,
        responses={
            202: ClusterDetailSerializer,
            403: OpenApiResponse(ErrorSerializer, "past your quota (as a launch's refusal)"),
            409: OpenApiResponse(
                ErrorSerializer, "not running, has a notebook already, or not a Spark cluster"
            ),
        },
    )
    @action(detail=True, methods=["post"])
    def notebook(self, request: Request, **kwargs) -> Response:
        """Add a notebook (JupyterLab, one more instance: 1 core, 2 GB and a disk) to a running
        Spark cluster launched without one; it grows the cluster as a resize does. Its state
        is the cluster's `notebook`."""
        cluster = self.get_object()
        growth.request_notebook(cluster.id, actor=request.user)
        return accepted(request, cluster)

    @extend_schema(request=ExtendSerializer, responses={200: ExtendedSerializer})
    @action(detail=True, methods=["post"])
    def extend(self, request: Request, **kwargs) -> Response:
        """Push the lease end `hours` further."""
        cluster = self.get_object()
        asked = ExtendSerializer(data=request.data)
        asked.is_valid(raise_exception=True)
        hours = asked.validated_data["hours"]
        end = growth.extend_lease(cluster.id, hours, actor=request.user)  # 409 if over
        return Response(ExtendedSerializer({"expires_at": end}).data)

    @extend_schema(request=IdleLimitSerializer, responses={200: IdleStatusSerializer})
    @action(detail=True, methods=["post"])
    def idle(self, request: Request, **kwargs) -> Response:
        """Set the idle limit: stopped (data kept) after `minutes` unused; null for none."""
        cluster = self.get_object()
        asked = IdleLimitSerializer(data=request.data)
        asked.is_valid(raise_exception=True)
        idle.set_limit(cluster.id, asked.validated_data["minutes"])
        cluster.refresh_from_db()
        return Response(IdleStatusSerializer(idle.status(cluster)).data)

    @extend_schema(request=None, responses={200: IdleStatusSerializer})
    @action(detail=True, methods=["post"], url_path="keep-running")
    def keep_running(self, request: Request, **kwargs) -> Response:
        """Start the idle clock again now, as if the cluster had just been used."""
        cluster = self.get_object()
        idle.keep_running(cluster.id)
        cluster.refresh_from_db()
        return Response(IdleStatusSerializer(idle.status(cluster)).data)

    @extend_schema(
        methods=["PUT"],
        request=AutoscalingSerializer,
        responses={200: AutoscalingSerializer},
    )
    @extend_schema(methods=["GET"], responses={200: AutoscalingSerializer})
    @extend_schema(methods=["DELETE"], request=None, responses={204: None})
    @action(detail=True, methods=["get", "put", "delete"])
    def autoscaling(self, request: Request, **kwargs) -> Response:
        """The cluster's autoscaling policy: GET it (404 without one), PUT one (its cooldown
        starts again; 400 naming a field that is wrong, or a product that reports no pending
        work), DELETE it (the cluster keeps its size)."""
        cluster = self.get_object()
        if request.method == "DELETE":
            autoscale.remove_policy(cluster.id, actor=request.user)
            return Response(status=204)
        if request.method == "PUT":
            asked = AutoscalingSerializer(data=request.data)
            asked.is_valid(raise_exception=True)
            policy = autoscale.set_policy(cluster.id, asked.validated_data, actor=request.user)
            return Response(AutoscalingSerializer(policy).data)
        found = autoscale.policy_of(cluster)
        if found is None:
            raise ApiError(404, "not_found", f"cluster {cluster.name} has no autoscaling policy")
        return Response(AutoscalingSerializer(found).data)

    @extend_schema(
        request=AllowedSourcesSerializer,
        responses={
            200: PerimeterSerializer,
            409: OpenApiResponse(ErrorSerializer, "the cluster is destroyed or on its way out"),
        },
    )
    @action(detail=True, methods=["put"], url_path="allowed-sources")
    def allowed_sources(self, request: Request, **kwargs) -> Response:
        """Replace the allow-list: the IPv4 addresses and CIDRs that reach the cluster's ports
        directly, besides its members, the portal and the site's ranges (`site_sources`); SSH
        (22) answers everyone with the owner's keys. `[]`: nobody else. The nodes' firewalls
        follow within seconds. 400 naming a bad entry."""
        cluster = self.get_object()
        asked = AllowedSourcesSerializer(data=request.data)
        asked.is_valid(raise_exception=True)
        by = signed_in_user(request).username
        try:
            sources = perimeter.set_allowed_sources(
                cluster.id, asked.validated_data["allowed_sources"], by
            )
        except perimeter.SourceError as error:  # its entries passed above: the cluster's state
            raise ApiError(409, "conflict", str(error)) from None
        answer = {"allowed_sources": sources, "site_sources": perimeter.site_sources()}
        return Response(PerimeterSerializer(answer).data)

    @extend_schema(parameters=[EventQuerySerializer], responses={200: EventPageSerializer})
    @action(detail=True, methods=["get"])
    def events(self, request: Request, **kwargs) -> Response:
        """Events after the cursor `since`, oldest first, at most `limit` of them. Pass the
        answer's `next` as `since` to get only what happened since: it stays the same while
        nothing new happened."""
        cluster = self.get_object()
        query = EventQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        since = int(query.validated_data.get("since", 0))
        events = list(
            cluster.events.filter(id__gt=since).order_by("id")[: query.validated_data["limit"]]
        )
        page = {"events": events, "next": str(events[-1].id if events else since)}
        return Response(EventPageSerializer(page).data)

    @extend_schema(
        parameters=[LogQuerySerializer],
        responses={(200, "text/plain"): OpenApiTypes.STR, **LOG_ERRORS},
    )
    @action(detail=True, methods=["get"], renderer_classes=LOG_RENDERERS)
    def logs(self, request: Request, **kwargs) -> HttpResponseBase:
        """An instance's container log as text/plain (stdout and stderr as written): its last
        `tail` lines, or with follow=true those and then each new line as it comes, until
        `seconds` pass or the container stops. With timestamps=true each line starts with its
        Docker timestamp; pass the last one as `since` to go on where an answer ended.
        409 when the instance has no container (not yet, or not any more); 429 when you
        already have the most streams open (PLATTER_STREAMS_PER_USER, named in the answer) or
        node calls in flight (PLATTER_NODE_CALLS_PER_USER)."""
        cluster = self.get_object()
        query = LogQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        asked = query.validated_data
        try:
            source = logs.source(cluster, asked.get("instance"))
            # 429 (TooManyNodeCalls) when the user has the most node calls in flight.
            with streams.node_call(signed_in_user(request).id, "container log"):
                if asked["follow"]:
                    lines = logs.follow(
                        source,
                        asked["tail"],
                        asked["seconds"],
                        after=asked.get("since"),
                        timestamps=asked["timestamps"],
                    )
                    # 429 (TooManyStreams) before any byte; held while it streams, on the loop.
                    slot = streams.claim(signed_in_user(request).id, "logs")
                    deadline = min(asked["seconds"], settings.STREAM_FOLLOW_SECONDS)
                    return text_stream(streams.held(slot, lines, deadline=deadline))
                found = logs.read(source, asked["tail"], after=asked.get("since"))
        except logs.UnknownInstance as error:
            raise serializers.ValidationError({"instance": str(error)}) from None
        except logs.NoContainer as error:
            raise ApiError(409, "no_container", str(error)) from None
        except NodeError as error:
            raise ApiError(503, "node_unavailable", str(error)) from None
        return HttpResponse(found.text(asked["timestamps"]), content_type=TEXT)


def accepted(request: Request, cluster: Cluster) -> Response:
    """202 with the cluster as it is now and a Location a client can poll."""
    fresh = detail_queryset().get(id=cluster.id)
    data = ClusterDetailSerializer(fresh, context={"request": request}).data
    return Response(
        data, status=status.HTTP_202_ACCEPTED, headers={"Location": cluster_url(request, fresh)}
    )
