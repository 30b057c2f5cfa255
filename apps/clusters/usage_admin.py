"""The admin's Quota and Node pages with what the clusters use: each limit's usage next to it
and a filter of the quotas near or at a limit; each node's cores, memory and disks in use.

The accounts and the inventory sit below the clusters and register those pages without usage
(apps/accounts/admin.py, apps/inventory/admin.py); the clusters' admin.py has register() put
them back with the columns, read from quotas.py and node_usage.py.
"""

from django.contrib import admin
from django.db.models import Count

from apps.accounts.admin import QuotaAdmin
from apps.accounts.models import LIMIT_FIELDS, Quota
from apps.inventory.admin import NodeAdmin
from apps.inventory.models import Node

from .node_usage import active_sum, free_disks
from .quotas import usage_of


def _usage(quota: Quota) -> dict[str, int]:
    if not hasattr(quota, "_usage"):  # derived once per row, from active allocations
        quota._usage = usage_of(quota)  # type: ignore[attr-defined]  # a cache on the row
    return quota._usage  # type: ignore[attr-defined]


def _used_of(quota: Quota, limit: str) -> str:
    maximum = getattr(quota, limit)
    return f"{_usage(quota)[limit]} / {'unlimited' if maximum is None else maximum}"


def fullest(quota: Quota) -> float:
    """The highest share of any set limit the quota's holder uses (0 when none is set)."""
    used = _usage(quota)
    shares = [
        used[name] / m if m else float(used[name] > 0)
        for name in LIMIT_FIELDS
        if (m := getattr(quota, name)) is not None
    ]
    return max(shares, default=0.0)


class UsageFilter(admin.SimpleListFilter):
    """Usage is derived, not stored, so the filter computes it per quota (fine at admin scale)."""

    title = "usage"
    parameter_name = "usage"

    def lookups(self, request, model_admin):
        return [("over80", "Over 80% of a limit"), ("at_limit", "At a limit")]

    def queryset(self, request, queryset):
        threshold = {"over80": 0.8, "at_limit": 1.0}.get(self.value())
        if threshold is None:
            return queryset
        ids = [q.id for q in queryset.select_related(None) if fullest(q) >= threshold]
        return queryset.filter(id__in=ids)


class QuotaUsageAdmin(QuotaAdmin):
    list_display = [*QuotaAdmin.list_display, *(f"usage_{name}" for name in LIMIT_FIELDS)]
    list_filter = [UsageFilter]
    readonly_fields = ["current_usage"]

    def current_usage(self, quota: Quota) -> str:
        if quota.pk is None:
            return "-"
        used = usage_of(quota)
        return ", ".join(f"{k.removeprefix('max_')}: {v}" for k, v in used.items())


# One column per limit showing derived usage next to it.
for _name in LIMIT_FIELDS:

    def _column(self, quota: Quota, _limit=_name) -> str:
        return _used_of(quota, _limit)

    _words = _name.removeprefix("max_").replace("_", " ")
    _column = admin.display(description=f"{_words} used / max")(_column)
    setattr(QuotaUsageAdmin, f"usage_{_name}", _column)


class NodeUsageAdmin(NodeAdmin):
    list_display = [*NodeAdmin.list_display, "cores_used", "memory_used", "disks_free"]

    def get_queryset(self, request):
        return (
            super()
            .get_queryset(request)
            .annotate(
                used_cores=active_sum("cores"),
                used_memory=active_sum("memory_mb"),
                free_disks=free_disks(),
                all_disks=Count("disks"),
            )
        )

    @admin.display(description="cores used / total")
    def cores_used(self, node: Node) -> str:
        used = node.used_cores  # type: ignore[attr-defined]  # annotated by get_queryset()
        return f"{used} / {node.cores} ({node.cores - used} free)"

    @admin.display(description="memory MB used / total")
    def memory_used(self, node: Node) -> str:
        return f"{node.used_memory} / {node.memory_mb}"  # type: ignore[attr-defined]  # annotated by get_queryset()

    @admin.display(description="disks free / total")
    def disks_free(self, node: Node) -> str:
        return f"{node.free_disks} / {node.all_disks}"  # type: ignore[attr-defined]  # annotated by get_queryset()


def register(site: admin.AdminSite) -> None:
    """Replace the Quota and Node pages the apps below registered with these."""
    for model, page in ((Quota, QuotaUsageAdmin), (Node, NodeUsageAdmin)):
        site.unregister(model)
        site.register(model, page)
