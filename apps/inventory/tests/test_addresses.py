import pytest

from apps.clusters.tests.factories import make_network
from apps.inventory.models import Address

pytestmark = pytest.mark.django_db


def test_a_network_gets_one_address_row_per_ip_of_its_range():
    network = make_network(size=10)
    assert network.addresses.count() == 10


def test_shrinking_the_range_drops_free_addresses_outside_it_and_keeps_held_ones():
    network = make_network(size=10)
    held = network.addresses.order_by("id").last()
    Address.objects.filter(id=held.id).update(held=True)
    network.last_address = "10.9.0.6"  # 10.9.0.2-6: five addresses
    network.save()
    ips = set(network.addresses.values_list("ip", flat=True))
    assert ips == {"10.9.0.2", "10.9.0.3", "10.9.0.4", "10.9.0.5", "10.9.0.6", held.ip}
