from django.db.models import Prefetch
from django.http import Http404
from drf_spectacular.utils import extend_schema
from rest_framework.generics import GenericAPIView
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.viewsets import ReadOnlyModelViewSet

from apps.catalog.models import Product, ProductVersion
from apps.catalog.services import launchable_versions

from .. import idempotency
from ..launching import find_version, launch_from_body
from ..serializers.clusters import ClusterDetailSerializer, LaunchSerializer
from ..serializers.products import ProductSerializer, VersionSerializer
from .clusters import IDEMPOTENCY_CONFLICT, accepted


class ProductViewSet(ReadOnlyModelViewSet):
    """Products with at least one version users may launch."""

    serializer_class = ProductSerializer
    lookup_field = "name"
    lookup_value_regex = "[^/]+"
    filter_backends = []

    def get_queryset(self):
        launchable = launchable_versions()
        return (
            Product.objects.filter(versions__in=launchable)
            .distinct()
            .prefetch_related(Prefetch("versions", queryset=launchable, to_attr="launchable"))
        )


class VersionView(GenericAPIView):
    """One version: its roles, ports and options schema (GET); launching it (POST)."""

    serializer_class = VersionSerializer
    filter_backends = []
    pagination_class = None

    def get_object(self) -> ProductVersion:
        version = find_version(self.kwargs["product"], self.kwargs["version"])
        if version is None:
            raise Http404("no launchable version with that name")
        return version

    @extend_schema(operation_id="versions_retrieve")
    def get(self, request: Request, product: str, version: str) -> Response:
        return Response(self.get_serializer(self.get_object()).data)

    @extend_schema(
        operation_id="versions_launch",
        request=LaunchSerializer,
        parameters=[idempotency.PARAMETER],
        responses={202: ClusterDetailSerializer, 422: IDEMPOTENCY_CONFLICT},
        description="Launch a cluster. The body holds the product's options (see the "
        "version's `options`, e.g. `size`, `disks`, `cpu`, `mem`) next to the launch keys "
        "below. Answers 202 with the queued cluster and its URL in `Location`.",
    )
    def post(self, request: Request, product: str, version: str) -> Response:
        def launch() -> Response:
            return accepted(
                request, launch_from_body(request.user, self.get_object(), request.data)
            )

        return idempotency.once(request, launch)
