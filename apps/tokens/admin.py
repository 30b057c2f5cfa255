from django.contrib import admin, messages
from django.http import HttpRequest

from .models import ApiToken
from .services import issue_token, revoke


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    """Shows name, prefix and dates; never the secret (not stored) nor its digest."""

    list_display = [
        "name",
        "user",
        "prefix",
        "read_only",
        "created",
        "last_used",
        "expires_at",
        "revoked_at",
    ]
    list_filter = ["read_only", ("revoked_at", admin.EmptyFieldListFilter)]
    search_fields = ["name", "prefix", "user__username"]
    list_select_related = ["user"]
    fields = [
        "user",
        "name",
        "read_only",
        "expires_at",
        "prefix",
        "created",
        "last_used",
        "revoked_at",
    ]
    readonly_fields = ["prefix", "created", "last_used", "revoked_at"]
    autocomplete_fields = ["user"]
    actions = ["revoke_tokens"]

    def get_readonly_fields(self, request: HttpRequest, obj=None) -> list[str]:
        if obj is not None:  # a token's owner and scope are fixed once issued
            return [*self.readonly_fields, "user", "read_only"]
        return self.readonly_fields

    def save_model(self, request: HttpRequest, obj: ApiToken, form, change: bool) -> None:
        if change:
            super().save_model(request, obj, form, change)
            return
        issued = issue_token(obj.user, obj.name, read_only=obj.read_only, actor=request.user)
        if obj.expires_at:
            type(obj).objects.filter(id=issued.token.id).update(expires_at=obj.expires_at)
        obj.pk = issued.token.pk
        obj.refresh_from_db()
        messages.warning(
            request, f"Token for {obj.user}: {issued.secret}  (copy it now; it is not shown again)"
        )

    @admin.action(description="Revoke the selected tokens")
    def revoke_tokens(self, request: HttpRequest, queryset) -> None:
        ids = queryset.values_list("id", flat=True)
        count = sum(revoke(token_id, actor=request.user) for token_id in ids)
        messages.success(request, f"{count} token(s) revoked")
