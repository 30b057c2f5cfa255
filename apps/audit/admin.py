from django.contrib import admin
from django.http import HttpRequest

from .models import AuditEvent


@admin.register(AuditEvent)
class AuditEventAdmin(admin.ModelAdmin):
    """Read-only for everyone, superusers included: an audit log nobody can edit."""

    list_display = [
        "time",
        "who",
        "action",
        "object_type",
        "object_repr",
        "detail",
        "client_address",
        "request_id",
    ]
    list_filter = ["action", ("actor", admin.RelatedOnlyFieldListFilter), "object_type"]
    search_fields = ["actor_name", "object_repr"]
    date_hierarchy = "time"
    readonly_fields = [
        "time",
        "actor",
        "actor_name",
        "action",
        "object_type",
        "object_id",
        "object_repr",
        "detail",
        "client_address",
        "request_id",
    ]
    fields = tuple(readonly_fields)

    @admin.display(description="actor", ordering="actor_name")
    def who(self, event: AuditEvent) -> str:
        return event.actor_name or "system"

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj=None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj=None) -> bool:
        return False
