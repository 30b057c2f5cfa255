from django.apps import AppConfig


class ClustersConfig(AppConfig):
    name = "apps.clusters"

    def ready(self) -> None:
        # A release wakes the queue (wakeup.py), which runs the admission pass: handed over
        # here, so the modules that release never import the admission queue.
        from apps.inventory.services import capacity_back

        from . import admission, wakeup

        wakeup.use_admission_pass(admission.admit_queued)
        # Capacity back in the inventory wakes it too: the inventory, a floor below, only
        # sends its signal.
        capacity_back.connect(wakeup.on_capacity_back, dispatch_uid="clusters_wake_queue")
