"""Inventory rules: address pools and node draining."""

from ipaddress import IPv4Address

from django.conf import settings
from django.db import transaction

from .models import Address, Network, Node


class AddressRangeError(ValueError):
    """A network's first/last addresses do not form a usable range."""


def address_range(network: Network) -> list[str]:
    first, last = IPv4Address(network.first_address), IPv4Address(network.last_address)
    if last < first:
        raise AddressRangeError(f"{network.name}: last address {last} is before first {first}")
    gateway = IPv4Address(network.gateway)
    return [str(IPv4Address(n)) for n in range(int(first), int(last) + 1) if n != int(gateway)]


def sync_addresses(network: Network) -> int:
    """Create the Address rows of the network's range that are missing; never deletes held
    ones (a shrunk range leaves them until released). Returns how many were created."""
    wanted = address_range(network)
    existing = set(Address.objects.filter(network=network).values_list("ip", flat=True))
    missing = [Address(network=network, ip=ip) for ip in wanted if ip not in existing]
    Address.objects.bulk_create(missing, batch_size=5000, ignore_conflicts=True)
    return len(missing)


@transaction.atomic
def set_node_state(node_id: int, state: str) -> None:
    """Draining keeps running instances but stops new placements; the node row lock makes
    the change wait for (and be seen by) reservations in flight on that node."""
    node = Node.objects.select_for_update().get(id=node_id)
    node.state = state
    node.save(update_fields=["state"])


def cluster_network() -> Network | None:
    """The network cluster addresses come from: SCHEDULER_NETWORK by name, else the first."""
    networks = Network.objects.order_by("id")
    if settings.SCHEDULER_NETWORK:
        networks = networks.filter(name=settings.SCHEDULER_NETWORK)
    return networks.first()
