from django.templatetags.static import static
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from apps.catalog.models import Product, ProductVersion
from apps.catalog.options import describe
from apps.clusters.notebook import has_notebook_option
from apps.clusters.resize import resizable_roles
from apps.products.registry import plugin_for


class ProductSerializer(serializers.ModelSerializer):
    url = serializers.HyperlinkedIdentityField(view_name="api:product-detail", lookup_field="name")
    logo = serializers.SerializerMethodField()
    versions = serializers.SerializerMethodField()

    class Meta:
        model = Product
        fields = ["name", "url", "title", "description", "logo", "versions"]

    def get_logo(self, product: Product) -> str | None:
        if not product.logo:
            return None
        return self.context["request"].build_absolute_uri(static(product.logo))

    def get_versions(self, product: Product) -> list[str]:
        # The view prefetches only launchable versions into `launchable`.
        return [v.version for v in product.launchable]  # type: ignore[attr-defined]  # prefetched by the view


class OptionsSchemaSerializer(serializers.Serializer):
    """catalog.options.describe(): each section maps option -> default; ``fields`` holds the
    full definitions (type, min, max, choices, description, section)."""

    required = serializers.DictField()  # type: ignore[assignment]  # the API's key
    optional = serializers.DictField()
    advanced = serializers.DictField()
    descriptions = serializers.DictField(child=serializers.CharField(allow_blank=True))
    fields = serializers.DictField(child=serializers.DictField())  # type: ignore[assignment]  # the API's key
    launch_keys = serializers.ListField(child=serializers.CharField())


class VersionSerializer(serializers.ModelSerializer):
    product = serializers.CharField(source="product.name")
    title = serializers.CharField(source="product.title")
    roles = serializers.SerializerMethodField()
    options = serializers.SerializerMethodField()
    job_kinds = serializers.SerializerMethodField(
        help_text="The kinds of job its clusters run (POST /api/v1/clusters/<id>/jobs); empty: none"
    )
    resizable_roles = serializers.SerializerMethodField(
        help_text="The roles whose instance count a resize may change"
    )
    notebook = serializers.SerializerMethodField(
        help_text="Whether it has the notebook option (a notebook instance at launch or later)"
    )
    launch_url = serializers.SerializerMethodField()

    class Meta:
        model = ProductVersion
        fields = [
            "product",
            "version",
            "title",
            "description",
            "image",
            "disk_kind",
            "roles",
            "ports",
            "options",
            "job_kinds",
            "resizable_roles",
            "notebook",
            "launch_url",
        ]

    def get_roles(self, version: ProductVersion) -> list[dict]:
        keys = ("name", "min", "max", "default", "cores", "memory_mb", "disks", "description")
        return [{k: role[k] for k in keys if k in role} for role in version.roles or []]

    @extend_schema_field(OptionsSchemaSerializer)
    def get_options(self, version: ProductVersion) -> dict:
        return describe(version)

    # What the version's plugin (apps/products) does with it, as the pages read it too.
    def get_job_kinds(self, version: ProductVersion) -> list[str]:
        return list(plugin_for(version).job_kinds)

    def get_resizable_roles(self, version: ProductVersion) -> list[str]:
        return resizable_roles(version)

    def get_notebook(self, version: ProductVersion) -> bool:
        return has_notebook_option(version)

    def get_launch_url(self, version: ProductVersion) -> str:
        return self.context["request"].build_absolute_uri(
            f"/api/v1/products/{version.product.name}/{version.version}"
        )
