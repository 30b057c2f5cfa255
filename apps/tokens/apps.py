from django.apps import AppConfig


class TokensConfig(AppConfig):
    name = "apps.tokens"
    verbose_name = "API tokens"

    def ready(self) -> None:
        # Registers the OpenAPI description of Bearer tokens with drf-spectacular.
        from . import schema  # noqa: F401
        from .signals import connect

        connect()
