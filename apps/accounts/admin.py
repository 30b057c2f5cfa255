from django import forms
from django.contrib import admin, messages
from django.template.response import TemplateResponse

from . import services, ssh
from .models import LIMIT_FIELDS, LDAPAccount, OIDCIdentity, Quota, SSHKey


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
    """Limits, saved through the services. What each holder uses next to each limit is the
    clusters' to say: apps/clusters/usage_admin.py registers this page again with it."""

    list_display = ["__str__"]
    list_select_related = ["user", "group"]
    actions = ["set_limits"]

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


@admin.register(LDAPAccount)
class LDAPAccountAdmin(admin.ModelAdmin):
    """Which users the LDAP directory signs in as: those it made, and those an admin adds here
    to link an existing user (a local one, say) to the directory's sign-in of that name."""

    list_display = ["user", "created"]
    search_fields = ["user__username"]
    raw_id_fields = ["user"]
