from django.apps import AppConfig


class ClustersConfig(AppConfig):
    name = "apps.clusters"

    def ready(self) -> None:
        # A release wakes the queue (wakeup.py), which runs the admission pass: handed over
        # here, so the modules that release never import the admission queue.
        from . import admission, wakeup

        wakeup.use_admission_pass(admission.admit_queued)
