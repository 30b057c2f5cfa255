"""CESGA registrations in the admin: what was sent, read-only (edit the version instead)."""

import json

from django.contrib import admin
from django.http import HttpRequest
from django.utils.html import format_html

from .models import CesgaRegistration


@admin.register(CesgaRegistration)
class CesgaRegistrationAdmin(admin.ModelAdmin):
    list_display = ("__str__", "registered_by", "created", "updated")
    list_select_related = ("version__product", "registered_by")
    search_fields = ("version__product__name", "version__version")
    fields = (
        "version",
        "logo_url",
        "registered_by",
        "created",
        "updated",
        "template_text",
        "options_json",
        "orchestrator_text",
        "rendered_json",
        "warnings_list",
    )
    readonly_fields = fields

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # registrations come through the CESGA API

    def has_change_permission(self, request: HttpRequest, obj=None) -> bool:
        return False

    @admin.display(description="template")
    def template_text(self, obj: CesgaRegistration) -> str:
        return format_html("<pre>{}</pre>", obj.template or "-")

    @admin.display(description="options")
    def options_json(self, obj: CesgaRegistration) -> str:
        return format_html("<pre>{}</pre>", json.dumps(obj.options, indent=2))

    @admin.display(description="orchestrator (stored, never run: convert it into configure)")
    def orchestrator_text(self, obj: CesgaRegistration) -> str:
        return format_html("<pre>{}</pre>", obj.orchestrator or "-")

    @admin.display(description="template rendered with the defaults")
    def rendered_json(self, obj: CesgaRegistration) -> str:
        return format_html("<pre>{}</pre>", json.dumps(obj.rendered, indent=2))

    @admin.display(description="warnings of the conversion")
    def warnings_list(self, obj: CesgaRegistration) -> str:
        return format_html("<pre>{}</pre>", "\n".join(obj.warnings) or "-")
