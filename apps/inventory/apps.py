from django.apps import AppConfig


class InventoryConfig(AppConfig):
    name = "apps.inventory"

    def ready(self) -> None:
        from . import signals  # noqa: F401  (connects the receivers)
