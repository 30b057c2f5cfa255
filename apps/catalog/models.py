"""The catalog: products users can launch and the versions of each."""

from django.db import models


class Product(models.Model):
    name = models.SlugField(max_length=63, unique=True, help_text="As used in URLs, e.g. hadoop")
    title = models.CharField(max_length=120)
    description = models.TextField(blank=True)
    # A path under static/ (e.g. catalog/logos/hadoop.svg); no remote URLs (no CDN).
    logo = models.CharField(max_length=255, blank=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class ProductVersion(models.Model):
    """One launchable version. The JSON fields follow the shapes documented in
    apps/catalog/options.py (roles, options schema, ports, configure steps)."""

    product = models.ForeignKey(Product, on_delete=models.PROTECT, related_name="versions")
    version = models.CharField(max_length=32)
    description = models.TextField(blank=True)
    image = models.CharField(max_length=255, help_text="Default image of every role")
    # [{"name": "worker", "min": 1, "max": 16, "default": 2, "image": "...", "cores": {...}, ...}]
    roles = models.JSONField(default=list)
    # {"required": {...}, "optional": {...}, "advanced": {...}}: option name -> definition
    options_schema = models.JSONField(default=dict)
    disk_kind = models.CharField(max_length=8, default="hdd")
    # [{"role": "master", "port": 9870, "name": "HDFS web UI"}]
    ports = models.JSONField(default=list, blank=True)
    environment = models.JSONField(default=dict, blank=True)
    # Post-start configuration: [{"role": "master", "command": ["sh", "-c", "..."]}]
    configure = models.JSONField(default=list, blank=True)
    # Linux capabilities the containers get back (they start with none); see catalog.services.
    capabilities = models.JSONField(default=list, blank=True)
    # Versions asking for capabilities beyond Docker's default set run only once an admin
    # trusts them.
    trusted = models.BooleanField(default=False)
    enabled = models.BooleanField(default=True)
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["product__name", "version"]
        constraints = [
            models.UniqueConstraint(fields=["product", "version"], name="catalog_unique_version"),
        ]

    def __str__(self) -> str:
        return f"{self.product.name} {self.version}"

    def clean(self) -> None:
        # Admins edit the JSON by hand: a broken schema must never reach a launch.
        from .options import validate_definition

        validate_definition(self)
