from django.apps import AppConfig


class MetricsConfig(AppConfig):
    name = "apps.metrics"

    def ready(self) -> None:
        # Web processes publish tasks and workers run them: both need the handlers that carry
        # the request id across and count task outcomes.
        from . import celery_signals  # noqa: F401
