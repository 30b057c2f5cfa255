"""Admin only: nodes (capacity, free, drain), disks (state, holder) and quotas."""

from django.db.models import Count, Prefetch, Q, QuerySet
from django_filters.rest_framework import DjangoFilterBackend
from drf_spectacular.utils import extend_schema
from rest_framework.decorators import action
from rest_framework.filters import OrderingFilter
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.serializers import BaseSerializer
from rest_framework.viewsets import ModelViewSet, ReadOnlyModelViewSet

from apps.accounts import services as quotas
from apps.accounts.models import Quota
from apps.clusters.models import DiskAllocation
from apps.clusters.node_usage import active_sum, free_disks
from apps.clusters.quotas import DISK_KINDS
from apps.inventory.models import Disk, Node
from apps.inventory.services import set_node_state

from ..filters import DiskFilter, NodeFilter
from ..permissions import IsAdmin
from ..serializers.inventory import DiskSerializer, NodeSerializer, QuotaSerializer


class NodeViewSet(ReadOnlyModelViewSet):
    serializer_class = NodeSerializer
    permission_classes = [IsAdmin]
    filterset_class = NodeFilter
    filter_backends = [DjangoFilterBackend, OrderingFilter]  # ?ordering=-cores
    ordering_fields = ["name", "state", "cores", "memory_mb"]

    def get_queryset(self) -> QuerySet[Node]:
        per_kind = {}
        for kind in DISK_KINDS:
            per_kind[f"{kind}_total"] = Count("disks", filter=Q(disks__kind=kind))
            per_kind[f"{kind}_free"] = free_disks(kind)
        return Node.objects.annotate(
            used_cores=active_sum("cores"), used_memory=active_sum("memory_mb"), **per_kind
        ).order_by("name")

    def _set_state(self, state: str) -> Response:
        set_node_state(self.get_object().id, state, actor=self.request.user)
        return Response(self.get_serializer(self.get_queryset().get(id=self.kwargs["pk"])).data)

    @extend_schema(request=None)
    @action(detail=True, methods=["post"])
    def drain(self, request: Request, pk: str) -> Response:
        """Keep running instances, place nothing new."""
        return self._set_state(Node.State.DRAINING)

    @extend_schema(request=None)
    @action(detail=True, methods=["post"])
    def undrain(self, request: Request, pk: str) -> Response:
        """Accept new instances again."""
        return self._set_state(Node.State.ACTIVE)


class DiskViewSet(ReadOnlyModelViewSet):
    serializer_class = DiskSerializer
    permission_classes = [IsAdmin]
    filterset_class = DiskFilter
    filter_backends = [DjangoFilterBackend, OrderingFilter]  # ?ordering=kind
    ordering_fields = ["id", "mount_path", "kind", "state", "capacity_bytes"]

    def get_queryset(self) -> QuerySet[Disk]:
        holders = DiskAllocation.objects.select_related("instance__cluster__owner")
        return Disk.objects.select_related("node").prefetch_related(
            Prefetch("allocations", holders.filter(active=True), to_attr="active_allocations"),
            Prefetch("allocations", holders.filter(data_kept=True), to_attr="kept_allocations"),
        )


class QuotaViewSet(ModelViewSet):
    """Users' and groups' quotas; usage is derived from live clusters, never stored."""

    serializer_class = QuotaSerializer
    permission_classes = [IsAdmin]
    filter_backends = []
    queryset = Quota.objects.select_related("user", "group").order_by("id")

    # Writes go through the services, which audit them.
    def perform_create(self, serializer: BaseSerializer) -> None:
        serializer.instance = quotas.save_quota(
            Quota(**serializer.validated_data), actor=self.request.user
        )

    def perform_update(self, serializer: BaseSerializer) -> None:
        quota = serializer.instance
        if not isinstance(quota, Quota):  # an update always has its row
            raise TypeError(f"no quota to update: {quota!r}")
        for name, value in serializer.validated_data.items():
            setattr(quota, name, value)
        quotas.save_quota(quota, actor=self.request.user)

    def perform_destroy(self, instance: Quota) -> None:
        quotas.delete_quota(instance, actor=self.request.user)
