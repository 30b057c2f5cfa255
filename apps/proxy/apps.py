from django.apps import AppConfig


class ProxyConfig(AppConfig):
    name = "apps.proxy"
    verbose_name = "Web UIs through the portal"
