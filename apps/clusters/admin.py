from django.contrib import admin, messages

from . import leftovers, services, usage_admin
from .models import (
    Cluster,
    ClusterEvent,
    DiskAllocation,
    GroupScaling,
    IdlePolicy,
    Instance,
    Leftover,
    ScalingPolicy,
)


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
    readonly_fields = [
        "role",
        "index",
        "hostname",
        "node",
        "address",
        "cores",
        "memory_mb",
        "disks",
        "disk_kind",
        "active",
        "state",
    ]
    fields = tuple(readonly_fields)
    extra = 0
    can_delete = False

    def has_add_permission(self, request, obj=None) -> bool:
        return False


class EventInline(admin.TabularInline):
    model = ClusterEvent
    readonly_fields = ["at", "level", "message"]
    fields = tuple(readonly_fields)
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
    actions = ["force_destroy"]

    @admin.action(description="Force-destroy the selected clusters (wipe their data)")
    def force_destroy(self, request, queryset):
        # Through the services like any destroy: the worker removes containers and disks.
        refused = []
        for cluster in queryset:
            try:
                services.request_destroy(cluster.id, keep_data=False, actor=request.user)
            except services.StateConflict as exc:
                refused.append(str(exc))
        done = queryset.count() - len(refused)
        self.message_user(request, f"Destroying {done} clusters.", messages.SUCCESS)
        for reason in refused:
            self.message_user(request, reason, messages.ERROR)


@admin.register(Instance)
class InstanceAdmin(ReadOnly):
    list_display = [
        "__str__",
        "cluster",
        "node",
        "address",
        "cores",
        "memory_mb",
        "disks",
        "disk_kind",
        "active",
        "state",
    ]
    list_filter = ["active", "state", "disk_kind"]
    list_select_related = ["cluster", "node", "address"]


@admin.register(DiskAllocation)
class DiskAllocationAdmin(ReadOnly):
    list_display = ["disk", "instance", "active", "data_kept", "created", "released"]
    list_filter = ["active", "data_kept"]
    list_select_related = ["disk__node", "instance__cluster"]


@admin.register(Leftover)
class LeftoverAdmin(ReadOnly):
    """Containers a node did not let us remove, and what stays held for them until the
    reconciler sees them gone (apps.clusters.leftovers): released is empty while held."""

    list_display = ["container", "cluster", "node", "address", "disk_ids", "created", "released"]
    list_filter = [("released", admin.EmptyFieldListFilter)]
    list_select_related = ["cluster", "node", "address"]
    actions = ["release_gone"]

    @admin.action(description="Release: these containers are gone for sure (a node wiped)")
    def release_gone(self, request, queryset):
        # For a node that will never answer again; the reconciler does this for the others.
        done = sum(
            leftovers.release(leftover, f"released by {request.user.get_username()}")
            for leftover in queryset.filter(released=None)
        )
        self.message_user(request, f"Released what {done} leftovers held.", messages.SUCCESS)


@admin.register(IdlePolicy)
class IdlePolicyAdmin(admin.ModelAdmin):
    """A quota group's default idle limit (apps.clusters.idle)."""

    list_display = ["group", "idle_limit_minutes"]
    search_fields = ["group__name"]


@admin.register(GroupScaling)
class GroupScalingAdmin(admin.ModelAdmin):
    """A quota group's autoscaling defaults and limit (apps.clusters.autoscale)."""

    list_display = ["group", "max_workers", "default_min_workers", "default_max_workers"]
    search_fields = ["group__name"]


@admin.register(ScalingPolicy)
class ScalingPolicyAdmin(admin.ModelAdmin):
    """Clusters' autoscaling policies and their last decisions (set by their owners)."""

    list_display = ["cluster", "min_workers", "max_workers", "cooldown_seconds", "decided_at"]
    readonly_fields = ["decided_at", "decision"]
    search_fields = ["cluster__name", "cluster__owner__username"]


# The accounts' Quota and the inventory's Node pages again, with what the clusters use.
usage_admin.register(admin.site)
