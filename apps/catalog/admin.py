"""Catalog editing: products with their versions; JSON fields checked before saving."""

import json

from django import forms
from django.contrib import admin
from django.db.models import Count
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html, format_html_join

from .models import ImagePreparation, Product, ProductRevision, ProductVersion
from .options import describe
from .revisions import current_revision, revision_diff

JSON_FIELDS = ("roles", "options_schema", "ports", "environment", "configure", "capabilities")


class PrettyJSONWidget(forms.Textarea):
    """Indented JSON, so an admin edits readable text instead of one long line."""

    def format_value(self, value):
        try:
            return json.dumps(json.loads(value), indent=2)
        except (TypeError, ValueError):
            return value


class ProductVersionForm(forms.ModelForm):
    class Meta:
        model = ProductVersion
        fields = (
            "product",
            "version",
            "description",
            "image",
            "disk_kind",
            "enabled",
            "trusted",
            *JSON_FIELDS,
        )
        widgets = {
            name: PrettyJSONWidget(attrs={"rows": 16, "cols": 100, "class": "vLargeTextField"})
            for name in JSON_FIELDS
        }


class ProductVersionInline(admin.TabularInline):
    model = ProductVersion
    fields = ("version", "image", "disk_kind", "enabled", "trusted")
    show_change_link = True
    extra = 0


@admin.register(Product)
class ProductAdmin(admin.ModelAdmin):
    list_display = ("name", "title", "version_count")
    search_fields = ("name", "title")
    inlines = [ProductVersionInline]

    @admin.display(description="versions")
    def version_count(self, obj: Product) -> int:
        return obj.versions.count()


@admin.register(ProductVersion)
class ProductVersionAdmin(admin.ModelAdmin):
    form = ProductVersionForm
    list_display = ("__str__", "image", "disk_kind", "enabled", "trusted", "created")
    list_filter = ("enabled", "trusted", "disk_kind", "product")
    list_select_related = ("product",)
    search_fields = ("product__name", "version", "image")
    readonly_fields = (
        "created",
        "options_preview",
        "revision_history",
        "latest_changes",
        "cesga_orchestrator",
    )
    fieldsets = (
        (None, {"fields": ("product", "version", "description", "image", "disk_kind")}),
        ("Access", {"fields": ("enabled", "trusted", "capabilities")}),
        (
            "Definition (shapes documented in apps/catalog/options.py)",
            {"fields": ("roles", "options_schema", "ports", "environment", "configure")},
        ),
        ("Preview", {"fields": ("options_preview", "created", "cesga_orchestrator")}),
        (
            "Revisions (a cluster keeps the one it launched with; an edit makes the next)",
            {"fields": ("revision_history", "latest_changes")},
        ),
    )

    @admin.display(description="options as users see them")
    def options_preview(self, obj: ProductVersion) -> str:
        if obj.pk is None:
            return "-"
        return format_html("<pre>{}</pre>", json.dumps(describe(obj), indent=2))

    @admin.display(description="CESGA orchestrator (stored, never run: convert it into configure)")
    def cesga_orchestrator(self, obj: ProductVersion) -> str:
        registration = getattr(obj, "cesga_registration", None)  # apps.api.cesga, if registered
        if registration is None or not registration.orchestrator:
            return "-"
        return format_html("<pre>{}</pre>", registration.orchestrator)

    def save_model(self, request: HttpRequest, obj, form, change) -> None:
        super().save_model(request, obj, form, change)
        current_revision(obj, request.user)  # a new one only if the definition changed

    @admin.display(description="history")
    def revision_history(self, obj: ProductVersion) -> str:
        revisions = _revisions(obj)
        if not revisions:
            return "none yet (the first launch or edit records revision 1)"
        rows = format_html_join(
            "",
            '<tr><td><a href="{}">{}</a></td><td>{}</td><td>{}</td><td>{}</td></tr>',
            (
                (
                    reverse("admin:catalog_productrevision_change", args=[r.pk]),
                    r.number,
                    f"{r.created:%Y-%m-%d %H:%M:%S} UTC",
                    r.created_by.get_username() if r.created_by else "-",
                    r.cluster_count,  # type: ignore[attr-defined]  # _revisions() annotates it
                )
                for r in revisions
            ),
        )
        return format_html(
            '<table class="revision-history"><thead><tr><th>revision</th><th>made</th>'
            "<th>by</th><th>clusters using it</th></tr></thead><tbody>{}</tbody></table>",
            rows,
        )

    @admin.display(description="latest revision against the one before")
    def latest_changes(self, obj: ProductVersion) -> str:
        revisions = _revisions(obj)
        if not revisions:
            return "-"
        previous = revisions[1] if len(revisions) > 1 else None
        return _diff_html(previous, revisions[0])


def _revisions(version: ProductVersion) -> list[ProductRevision]:
    if version.pk is None:
        return []
    return list(
        version.revisions.select_related("created_by")
        .annotate(cluster_count=Count("clusters"))
        .order_by("-number")
    )


def _diff_html(before: ProductRevision | None, after: ProductRevision) -> str:
    return format_html('<pre class="revision-diff">{}</pre>', revision_diff(before, after))


@admin.register(ProductRevision)
class ProductRevisionAdmin(admin.ModelAdmin):
    """Revisions are read, never edited: this admin only shows them."""

    list_display = ("__str__", "created", "created_by")
    list_filter = ("version__product",)
    list_select_related = ("version__product", "created_by")
    fields = ("version", "number", "created", "created_by", "definition_json", "changes")
    readonly_fields = fields

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj=None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj=None) -> bool:
        return False

    @admin.display(description="definition")
    def definition_json(self, obj: ProductRevision) -> str:
        return format_html("<pre>{}</pre>", json.dumps(obj.definition, indent=2, sort_keys=True))

    @admin.display(description="against the revision before")
    def changes(self, obj: ProductRevision) -> str:
        previous = obj.version.revisions.filter(number__lt=obj.number).order_by("-number").first()
        return _diff_html(previous, obj)


@admin.register(ImagePreparation)
class ImagePreparationAdmin(admin.ModelAdmin):
    """Where each product image's preparation stands (`lab images`, ./platter run): read only,
    as the preparation writes it."""

    list_display = ("image", "state", "nodes_ready", "nodes_total", "step", "updated")
    list_filter = ("state",)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj=None) -> bool:
        return False
