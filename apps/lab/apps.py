from django.apps import AppConfig


class LabConfig(AppConfig):
    name = "apps.lab"
