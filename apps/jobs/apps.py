from django.apps import AppConfig


class JobsConfig(AppConfig):
    name = "apps.jobs"
    verbose_name = "Jobs"

    def ready(self) -> None:
        # A stop, a failure or a destroy of a cluster ends its live jobs (services.py).
        from apps.clusters.transitions import cluster_moved

        from .services import on_cluster_moved

        cluster_moved.connect(on_cluster_moved, dispatch_uid="jobs-end-with-their-cluster")
