"""The catalog: products users can launch and the versions of each."""

from functools import cached_property

from django.conf import settings
from django.db import models

from .definition import definition_fields, validate_definition
from .spec import ProductDefinition, parse_definition


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
    # The product plugin (apps/products/registry.py) that resizes it, runs its jobs, says when
    # it is in use; blank: the generic one, which resizes no role that keeps state.
    plugin = models.CharField(max_length=32, blank=True, default="")
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

    @cached_property
    def definition(self) -> ProductDefinition:
        """The JSON fields parsed into typed objects (apps.catalog.spec), once per instance;
        clean() parses and checks them afresh. Raises DefinitionError when their shape is
        broken (what spans fields was checked when saved)."""
        return parse_definition(definition_fields(self), checks=False)

    def clean(self) -> None:
        # Admins edit the JSON by hand: a broken schema must never reach a launch. Each
        # problem lands on its field, its message naming the path (roles[1].cores: ...).
        self.__dict__["definition"] = validate_definition(self)


class ProductRevision(models.Model):
    """A frozen copy of a version's definition (apps/catalog/revisions.py makes them).

    The version stays the editable head; a cluster keeps the revision it launched with, so an
    admin's later edit never changes a cluster at its next start. Never updated: an edit makes
    the next revision, and one a cluster uses cannot be deleted."""

    version = models.ForeignKey(ProductVersion, on_delete=models.CASCADE, related_name="revisions")
    number = models.PositiveIntegerField()
    # {"image", "roles", "options_schema", "disk_kind", "ports", "environment", "configure",
    # "capabilities"}: the version's fields when the revision was made.
    definition = models.JSONField()
    created = models.DateTimeField(auto_now_add=True)
    # Who saved the edit; empty for revisions recorded by a launch or a catalog load.
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        ordering = ["version", "-number"]
        constraints = [
            models.UniqueConstraint(fields=["version", "number"], name="catalog_unique_revision"),
        ]

    def __str__(self) -> str:
        return f"{self.version} r{self.number}"

    def save(self, *args, **kwargs) -> None:
        if not self._state.adding:
            raise ValueError(f"{self} is immutable: edit the version to make a new revision")
        super().save(*args, **kwargs)


class ImagePreparation(models.Model):
    """A product image being put on the nodes (built, copied or pulled) while the portal already
    answers: `./platter run` prepares the product images behind the portal (apps/lab/products.py).
    A launch of a version whose image is being prepared queues with the step as its reason
    and starts once the image is on the nodes (apps/catalog/images.py: waiting_for_images)."""

    class State(models.TextChoices):
        PREPARING = "preparing"
        READY = "ready"
        FAILED = "failed"

    image = models.CharField(max_length=300, unique=True)  # as the nodes name it
    state = models.CharField(max_length=10, choices=State.choices, default=State.PREPARING)
    step = models.CharField(max_length=300, blank=True)  # "building on lab-1", the error...
    nodes_ready = models.PositiveIntegerField(default=0)
    nodes_total = models.PositiveIntegerField(default=0)
    updated = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"{self.image}: {self.state}"
