"""Personal API tokens: only a SHA-256 digest is stored; the prefix is kept in clear so a
token can be found in one indexed lookup and recognised in lists ("plt_3fa9c2d1…")."""

from django.conf import settings
from django.db import models
from django.utils import timezone


class ApiToken(models.Model):
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens"
    )
    name = models.CharField(max_length=100, help_text="What the token is for, e.g. laptop")
    prefix = models.CharField(max_length=16, unique=True, editable=False)
    digest = models.CharField(max_length=64, editable=False)
    read_only = models.BooleanField(default=False, help_text="Only GET, HEAD and OPTIONS")
    created = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField(null=True, blank=True, help_text="Never when empty")
    last_used = models.DateTimeField(null=True, blank=True, editable=False)
    revoked_at = models.DateTimeField(null=True, blank=True, editable=False)
    # The token whose request made this one (None: a signed-in person, an admin, a command).
    # Revoking it revokes this one too (services.revoke): a leaked token's offspring go with it.
    parent = models.ForeignKey(
        "self",
        null=True,
        blank=True,
        editable=False,
        on_delete=models.CASCADE,
        related_name="children",
    )

    class Meta:
        ordering = ["-created"]
        verbose_name = "API token"

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"

    @property
    def is_expired(self) -> bool:
        return self.expires_at is not None and self.expires_at <= timezone.now()

    @property
    def is_revoked(self) -> bool:
        return self.revoked_at is not None

    @property
    def is_usable(self) -> bool:
        return not (self.is_expired or self.is_revoked) and self.user.is_active
