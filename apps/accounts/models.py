"""Users are Django's own; quotas cap what a user (or everyone in a group together) may hold.

Limits only: usage is always derived from active allocations (apps.clusters.quotas), never a
counter kept here that could drift.
"""

from django.conf import settings
from django.contrib.auth.models import Group
from django.db import models

# Limit fields in the order they are checked and shown; None means unlimited.
LIMIT_FIELDS = (
    "max_clusters",
    "max_instances",
    "max_cores",
    "max_memory_mb",
    "max_disks",
    "max_disks_hdd",
    "max_disks_ssd",
    "max_disks_nvme",
)


class Quota(models.Model):
    user = models.OneToOneField(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="quota",
    )
    group = models.OneToOneField(
        Group, null=True, blank=True, on_delete=models.CASCADE, related_name="quota"
    )
    max_clusters = models.PositiveIntegerField(null=True, blank=True)
    max_instances = models.PositiveIntegerField(null=True, blank=True)
    max_cores = models.PositiveIntegerField(null=True, blank=True)
    max_memory_mb = models.PositiveIntegerField(null=True, blank=True)
    max_disks = models.PositiveIntegerField(null=True, blank=True)
    max_disks_hdd = models.PositiveIntegerField(null=True, blank=True)
    max_disks_ssd = models.PositiveIntegerField(null=True, blank=True)
    max_disks_nvme = models.PositiveIntegerField(null=True, blank=True)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=(
                    models.Q(user__isnull=False, group__isnull=True)
                    | models.Q(user__isnull=True, group__isnull=False)
                ),
                name="quota_for_user_xor_group",
            ),
        ]

    def __str__(self) -> str:
        return f"quota of {self.user or self.group}"

    def limits(self) -> dict[str, int | None]:
        return {name: getattr(self, name) for name in LIMIT_FIELDS}


class SSHKey(models.Model):
    """A public SSH key of a user: it opens the user's clusters (the instance that runs sshd,
    see apps.clusters.access). Keys are checked and normalised by apps.accounts.ssh."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="ssh_keys"
    )
    name = models.CharField(max_length=100, help_text="What the key is for, e.g. laptop")
    public_key = models.TextField(help_text='One line: "type base64 [comment]"')
    fingerprint = models.CharField(max_length=64, help_text="SHA256:… as ssh-keygen -l shows it")
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created", "id"]
        verbose_name = "SSH key"
        constraints = [
            models.UniqueConstraint(fields=["user", "fingerprint"], name="sshkey_unique_per_user"),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.fingerprint})"

    @property
    def key_type(self) -> str:
        return self.public_key.split(" ", 1)[0]


class OIDCIdentity(models.Model):
    """The OpenID Connect account a user signs in with: the provider (its issuer) and the
    provider's `sub` for the person, which never change. A sign-in finds its user by these
    two, never by a name claim (preferred_username may change and is not unique by spec)."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="oidc_identity"
    )
    issuer = models.CharField(max_length=500, help_text="The provider's issuer URL (iss)")
    subject = models.CharField(max_length=255, help_text="The provider's id of the person (sub)")
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name = "OpenID Connect identity"
        verbose_name_plural = "OpenID Connect identities"
        constraints = [
            models.UniqueConstraint(
                fields=["issuer", "subject"], name="oidcidentity_unique_issuer_subject"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.subject} at {self.issuer}"


class LDAPAccount(models.Model):
    """A user the LDAP directory signs in as: made by the directory's first sign-in of that
    name, or linked by an admin. A directory sign-in lands only on such a user, never on a
    local account or one an OpenID Connect sign-in made that happens to bear the same name."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="ldap_account"
    )
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name = "LDAP account"

    def __str__(self) -> str:
        return f"LDAP account {self.user}"
