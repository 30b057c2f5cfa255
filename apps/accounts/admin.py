from django import forms
from django.contrib import admin, messages
from django.template.response import TemplateResponse

from apps.clusters.quotas import usage_of

from . import services, ssh
from .models import LIMIT_FIELDS, OIDCIdentity, Quota, SSHKey


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


class LimitsForm(forms.Form):
    """Limits to set on every selected quota; an empty box leaves that limit as it is."""

    clear = forms.MultipleChoiceField(
        choices=[(n, n) for n in LIMIT_FIELDS],
        required=False,
        widget=forms.CheckboxSelectMultiple,
        label="Make unlimited",
    )

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        for name in LIMIT_FIELDS:
            self.fields[name] = forms.IntegerField(min_value=0, required=False)


@admin.register(Quota)
class QuotaAdmin(admin.ModelAdmin):
    list_display = ["__str__", *(f"usage_{name}" for name in LIMIT_FIELDS)]
    list_select_related = ["user", "group"]
    list_filter = [UsageFilter]
    readonly_fields = ["current_usage"]
    actions = ["set_limits"]

    def current_usage(self, quota: Quota) -> str:
        if quota.pk is None:
            return "-"
        used = usage_of(quota)
        return ", ".join(f"{k.removeprefix('max_')}: {v}" for k, v in used.items())

    # Saving and deleting go through the services, which audit the change.
    def save_model(self, request, obj: Quota, form, change: bool) -> None:
        services.save_quota(obj, actor=request.user)

    def delete_model(self, request, obj: Quota) -> None:
        services.delete_quota(obj, actor=request.user)

    def delete_queryset(self, request, queryset) -> None:
        for quota in queryset:
            services.delete_quota(quota, actor=request.user)

    @admin.action(description="Set limits of the selected quotas", permissions=["change"])
    def set_limits(self, request, queryset):
        form = LimitsForm(request.POST if "apply" in request.POST else None)
        if form.is_valid():
            changes = {
                n: v for n, v in form.cleaned_data.items() if n in LIMIT_FIELDS and v is not None
            }
            changes.update(dict.fromkeys(form.cleaned_data["clear"]))
            ids = queryset.values_list("id", flat=True)
            count = services.set_limits(ids, changes, actor=request.user)
            self.message_user(
                request,
                f"Set {', '.join(changes) or 'nothing'} on {count} quotas.",
                messages.SUCCESS,
            )
            return None
        context = {
            **self.admin_site.each_context(request),
            "form": form,
            "quotas": queryset,
            "opts": self.model._meta,
            "title": "Set limits",
        }
        return TemplateResponse(request, "admin/accounts/quota/set_limits.html", context)


# One column per limit showing derived usage next to it.
for _name in LIMIT_FIELDS:

    def _column(self, quota: Quota, _limit=_name) -> str:
        return _used_of(quota, _limit)

    _words = _name.removeprefix("max_").replace("_", " ")
    _column = admin.display(description=f"{_words} used / max")(_column)
    setattr(QuotaAdmin, f"usage_{_name}", _column)


@admin.register(SSHKey)
class SSHKeyAdmin(admin.ModelAdmin):
    """Staff see and remove users' keys; users add them (checked) on their SSH keys page."""

    list_display = ["name", "user", "fingerprint", "created"]
    list_select_related = ["user"]
    search_fields = ["name", "user__username", "fingerprint"]
    readonly_fields = ["user", "name", "public_key", "fingerprint", "created"]

    def has_add_permission(self, request) -> bool:
        return False

    # Through the service, so the owner's running clusters lose the key too.
    def delete_model(self, request, obj: SSHKey) -> None:
        ssh.delete_key(obj.user, obj.id)

    def delete_queryset(self, request, queryset) -> None:
        for key in queryset.select_related("user"):
            ssh.delete_key(key.user, key.id)


@admin.register(OIDCIdentity)
class OIDCIdentityAdmin(admin.ModelAdmin):
    """Which provider account (issuer, sub) signs in as which user. An admin adds one to link
    an existing user (a local or LDAP one, say) to a person's OpenID Connect sign-in."""

    list_display = ["user", "subject", "issuer", "created"]
    search_fields = ["user__username", "subject", "issuer"]
    raw_id_fields = ["user"]
