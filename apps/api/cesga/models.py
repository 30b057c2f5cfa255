"""What a CESGA registration sent, kept next to the catalog version it made.

The version (apps.catalog) holds the definition Platter launches from; this keeps CESGA's own
texts: the template and options it was converted from, the orchestrator script (stored and
shown to admins, never run: an admin converts it into the version's configure steps), and the
warnings of the last conversion."""

from django.conf import settings
from django.db import models

from apps.catalog.models import ProductVersion


class CesgaRegistration(models.Model):
    version = models.OneToOneField(
        ProductVersion, on_delete=models.CASCADE, related_name="cesga_registration"
    )
    logo_url = models.URLField(max_length=2000, blank=True)
    template = models.TextField(blank=True)
    # As PUT: {"required": {...}, "optional": {...}, "advanced": {...}, "descriptions": {...}}
    options = models.JSONField(null=True, blank=True)
    orchestrator = models.TextField(blank=True)
    # The template rendered with the options' defaults, and what its conversion warned about.
    rendered = models.JSONField(null=True, blank=True)
    warnings = models.JSONField(default=list, blank=True)
    registered_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name = "CESGA registration"

    def __str__(self) -> str:
        return f"CESGA registration of {self.version}"

    @property
    def missing(self) -> list[str]:
        """What the version still needs before it can be launched."""
        found = {"template": not self.template, "options": self.options is None}
        return [name for name, absent in found.items() if absent]
