"""Keep each network's address pool in step with its range."""

from django.db.models.signals import post_save
from django.dispatch import receiver

from .models import Network
from .services import sync_addresses


@receiver(post_save, sender=Network, dispatch_uid="inventory_sync_addresses")
def network_saved(sender, instance: Network, **kwargs) -> None:
    sync_addresses(instance)
