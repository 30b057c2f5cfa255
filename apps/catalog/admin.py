"""Catalog editing: products with their versions; JSON fields checked before saving."""

import json

from django import forms
from django.contrib import admin
from django.utils.html import format_html

from .models import Product, ProductVersion
from .options import describe

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
    readonly_fields = ("created", "options_preview")
    fieldsets = (
        (None, {"fields": ("product", "version", "description", "image", "disk_kind")}),
        ("Access", {"fields": ("enabled", "trusted", "capabilities")}),
        (
            "Definition (shapes documented in apps/catalog/options.py)",
            {"fields": ("roles", "options_schema", "ports", "environment", "configure")},
        ),
        ("Preview", {"fields": ("options_preview", "created")}),
    )

    @admin.display(description="options as users see them")
    def options_preview(self, obj: ProductVersion) -> str:
        if obj.pk is None:
            return "-"
        return format_html("<pre>{}</pre>", json.dumps(describe(obj), indent=2))
