from django.db.models import Prefetch, QuerySet
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import mixins, serializers, status
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.viewsets import GenericViewSet

from apps.clusters import services
from apps.clusters.models import Cluster, DiskAllocation, Instance

from ..filters import ClusterFilter
from ..launching import find_version, launch_from_body
from ..permissions import visible_clusters
from ..serializers.clusters import (
    ClusterCreateSerializer,
    ClusterDetailSerializer,
    ClusterSerializer,
    ExtendedSerializer,
    ExtendSerializer,
    cluster_url,
)


def detail_queryset(base: QuerySet[Cluster] | None = None) -> QuerySet[Cluster]:
    """Clusters with everything the detail shows, in a fixed number of queries."""
    allocations = DiskAllocation.objects.filter(active=True).select_related("disk__node")
    instances = Instance.objects.select_related("node", "address").prefetch_related(
        Prefetch("allocations", queryset=allocations, to_attr="active_allocations")
    )
    return (
        (base if base is not None else Cluster.objects.all())
        .select_related("owner", "version__product")
        .prefetch_related(Prefetch("instances", queryset=instances), "events")
    )


class KeepDataSerializer(serializers.Serializer):
    keep_data = serializers.BooleanField(default=True)


class ClusterViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, GenericViewSet):
    """Your clusters (admins: everyone's). Also reachable as
    /clusters/<username>/<product>/<version>/<id>."""

    filterset_class = ClusterFilter
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
        if self.action == "list":
            return clusters.select_related("owner", "version__product")
        return detail_queryset(clusters)

    def get_serializer_class(self):
        return ClusterSerializer if self.action == "list" else ClusterDetailSerializer

    @extend_schema(request=ClusterCreateSerializer, responses={202: ClusterDetailSerializer})
    def create(self, request: Request) -> Response:
        """Launch with the product and version named in the body (see products/…/…)."""
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
        services.request_start(cluster.id, actor=request.user)
        return accepted(request, cluster)

    @extend_schema(request=ExtendSerializer, responses={200: ExtendedSerializer})
    @action(detail=True, methods=["post"])
    def extend(self, request: Request, **kwargs) -> Response:
        """Push the lease end `hours` further."""
        cluster = self.get_object()
        asked = ExtendSerializer(data=request.data)
        asked.is_valid(raise_exception=True)
        hours = asked.validated_data["hours"]
        end = services.extend_lease(cluster.id, hours, actor=request.user)  # 409 if over
        return Response(ExtendedSerializer({"expires_at": end}).data)


def accepted(request: Request, cluster: Cluster) -> Response:
    """202 with the cluster as it is now and a Location a client can poll."""
    fresh = detail_queryset().get(id=cluster.id)
    data = ClusterDetailSerializer(fresh, context={"request": request}).data
    return Response(
        data, status=status.HTTP_202_ACCEPTED, headers={"Location": cluster_url(request, fresh)}
    )
