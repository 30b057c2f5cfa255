from django.contrib import admin

from .models import Cluster, ClusterEvent, DiskAllocation, Instance


class ReadOnly(admin.ModelAdmin):
    """State changes go through the services (locks, CAS); the admin only shows."""

    def has_add_permission(self, request, obj=None) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


class InstanceInline(admin.TabularInline):
    model = Instance
    fields = ["role", "index", "hostname", "node", "address", "cores", "memory_mb", "disks",
              "disk_kind", "active", "state"]  # fmt: skip
    readonly_fields = fields
    extra = 0
    can_delete = False

    def has_add_permission(self, request, obj=None) -> bool:
        return False


class EventInline(admin.TabularInline):
    model = ClusterEvent
    fields = ["at", "level", "message"]
    readonly_fields = fields
    extra = 0
    can_delete = False

    def has_add_permission(self, request, obj=None) -> bool:
        return False


@admin.register(Cluster)
class ClusterAdmin(ReadOnly):
    list_display = ["name", "owner", "version", "state", "created", "expires_at", "reason"]
    list_filter = ["state"]
    search_fields = ["name", "owner__username"]
    list_select_related = ["owner", "version__product"]
    inlines = [InstanceInline, EventInline]


@admin.register(Instance)
class InstanceAdmin(ReadOnly):
    list_display = ["__str__", "cluster", "node", "address", "cores", "memory_mb", "disks",
                    "disk_kind", "active", "state"]  # fmt: skip
    list_filter = ["active", "state", "disk_kind"]
    list_select_related = ["cluster", "node", "address"]


@admin.register(DiskAllocation)
class DiskAllocationAdmin(ReadOnly):
    list_display = ["disk", "instance", "active", "data_kept", "created", "released"]
    list_filter = ["active", "data_kept"]
    list_select_related = ["disk__node", "instance__cluster"]
