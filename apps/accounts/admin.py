from django.contrib import admin

from apps.clusters.quotas import group_usage, user_usage

from .models import LIMIT_FIELDS, Quota


def _used_of(quota: Quota, limit: str) -> str:
    if not hasattr(quota, "_usage"):  # derived once per row, from active allocations
        quota._usage = user_usage(quota.user_id) if quota.user_id else group_usage(quota.group_id)
    maximum = getattr(quota, limit)
    return f"{quota._usage[limit]} / {'unlimited' if maximum is None else maximum}"


@admin.register(Quota)
class QuotaAdmin(admin.ModelAdmin):
    list_display = ["__str__", *(f"usage_{name}" for name in LIMIT_FIELDS)]
    list_select_related = ["user", "group"]
    readonly_fields = ["current_usage"]

    def current_usage(self, quota: Quota) -> str:
        if quota.pk is None:
            return "-"
        used = user_usage(quota.user_id) if quota.user_id else group_usage(quota.group_id)
        return ", ".join(f"{k.removeprefix('max_')}: {v}" for k, v in used.items())


# One column per limit showing derived usage next to it.
for _name in LIMIT_FIELDS:

    def _column(self, quota: Quota, _limit=_name) -> str:
        return _used_of(quota, _limit)

    _column.short_description = _name.removeprefix("max_").replace("_", " ") + " used / max"
    setattr(QuotaAdmin, f"usage_{_name}", _column)
