from django.conf import settings
from django.core.serializers.json import DjangoJSONEncoder
from django.db import models


class IdempotentRequest(models.Model):
    """The first answer to a launch sent with an Idempotency-Key, so that a retry (the answer
    got lost, the client timed out) gets it again instead of launching a second cluster. See
    apps.api.idempotency."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE)
    key = models.CharField(max_length=255)
    # SHA-256 of the method, path and body: the same key with another request is refused.
    fingerprint = models.CharField(max_length=64)
    status = models.PositiveSmallIntegerField()
    body = models.JSONField(encoder=DjangoJSONEncoder)
    location = models.CharField(max_length=2000, blank=True)
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["user", "key"], name="idempotency_key_once_per_user")
        ]

    def __str__(self) -> str:
        return f"{self.key} of user {self.user_id}"


# Registered with this app so its migrations live in apps/api (apps/api/cesga/models.py).
from .cesga.models import CesgaRegistration  # noqa: E402, F401
