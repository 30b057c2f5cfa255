"""A token, or any token of a user, that changes in this process leaves the token cache at
once (apps.tokens.cache): a revoked token, a deactivated or demoted user."""

from django.contrib.auth import get_user_model
from django.db.models.signals import post_delete, post_save

from . import cache
from .models import ApiToken


def _token_changed(sender, instance: ApiToken, **kwargs) -> None:
    cache.forget(token_id=instance.pk)


def _user_changed(sender, instance, **kwargs) -> None:
    cache.forget(user_id=instance.pk)


def connect() -> None:
    for signal in (post_save, post_delete):
        signal.connect(_token_changed, sender=ApiToken, dispatch_uid="tokens-cache-token")
        signal.connect(_user_changed, sender=get_user_model(), dispatch_uid="tokens-cache-user")
