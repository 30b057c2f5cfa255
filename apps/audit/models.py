"""The audit log: who did what to which object, when and from where.

Rows copy what they need to name the object (type, id, text) instead of pointing at it, so
they outlive the clusters, tokens, nodes and quotas they talk about; the actor is a nullable
link plus a copy of the username for the same reason. Rows are only ever added: the admin
shows them read-only and a database trigger (migration 0002) refuses any other change.
"""

from django.conf import settings
from django.core.serializers.json import DjangoJSONEncoder
from django.db import models
from django.utils import timezone


class AuditEvent(models.Model):
    class Action(models.TextChoices):
        CLUSTER_LAUNCH = "cluster.launch"
        CLUSTER_STOP = "cluster.stop"
        CLUSTER_START = "cluster.start"
        CLUSTER_DESTROY = "cluster.destroy"
        CLUSTER_EXTEND = "cluster.extend"
        CLUSTER_RESIZE = "cluster.resize"
        CLUSTER_AUTOSCALING = "cluster.autoscaling"
        QUOTA_CHANGE = "quota.change"
        TOKEN_CREATE = "token.create"  # noqa: S105 (action names, not secrets)
        TOKEN_REVOKE = "token.revoke"  # noqa: S105
        NODE_DRAIN = "node.drain"
        NODE_ACTIVATE = "node.activate"
        NODE_DOWN = "node.down"
        NODE_MAINTENANCE = "node.maintenance"
        DISK_FAIL = "disk.fail"
        DISK_RETIRE = "disk.retire"
        DISK_AVAILABLE = "disk.available"
        JOB_SUBMIT = "job.submit"
        JOB_CANCEL = "job.cancel"

    time = models.DateTimeField(default=timezone.now, db_index=True, editable=False)
    # None: the system did it (beat expiring a lease, the reconciler marking a node down).
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="audit_events",
    )
    actor_name = models.CharField(max_length=150, blank=True, help_text="empty: the system")
    action = models.CharField(max_length=32, choices=Action.choices)
    object_type = models.CharField(max_length=64, help_text="e.g. clusters.cluster")
    object_id = models.PositiveBigIntegerField(null=True, blank=True)
    object_repr = models.CharField(max_length=255)
    detail = models.JSONField(default=dict, blank=True, encoder=DjangoJSONEncoder)
    # From portal.context: set for web and API requests, empty for tasks and commands.
    client_address = models.GenericIPAddressField(null=True, blank=True)
    request_id = models.CharField(max_length=64, blank=True)

    class Meta:
        ordering = ["-time", "-id"]
        indexes = [models.Index(fields=["object_type", "object_id"], name="audit_object")]

    def __str__(self) -> str:
        who = self.actor_name or "system"
        return f"{self.time:%Y-%m-%d %H:%M:%S} {who} {self.action} {self.object_repr}"
