from django.apps import AppConfig


class UsageConfig(AppConfig):
    name = "apps.usage"
    verbose_name = "Usage"
