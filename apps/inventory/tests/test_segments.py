"""Sites declare their cluster segments (VLANs) in one command; nodes hang each segment's
macvlan off the VLAN sub-interface of their own parent."""

import pytest
from django.core.management import CommandError, call_command

from apps.inventory.models import Network, Node

pytestmark = pytest.mark.django_db


def test_one_isolated_network_per_vlan_each_the_next_subnet(capsys):
    call_command("add_segments", "10.50.0.0/16", "100-102")
    networks = list(Network.objects.order_by("vlan"))
    assert [(n.name, n.subnet, n.vlan, n.isolated) for n in networks] == [
        ("vlan-100", "10.50.0.0/24", 100, True),
        ("vlan-101", "10.50.1.0/24", 101, True),
        ("vlan-102", "10.50.2.0/24", 102, True),
    ]
    assert networks[0].addresses.count() == 253  # .2 to .254: the gateway keeps .1
    node = Node(name="n1", network_parent="eth1")
    assert networks[1].parent_on(node) == "eth1.101"
    assert networks[1].docker_name == "platter-vlan-101"
    assert "vlan-102: 10.50.2.0/24" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("pool", "vlans", "message"),
    [
        ("10.50.0.0/23", "1-3", "holds fewer than 3 /24 subnets"),
        ("10.50.0.0/16", "0-2", "VLAN ids must lie in 1-4094"),
        ("10.50.0.0/16", "4094-4095", "VLAN ids must lie in 1-4094"),
        ("10.50.0.0/33", "5", "pool '10.50.0.0/33'"),
        ("10.50.0.0/16", "a-b", "VLANS must look like 100-163"),
    ],
)
def test_bad_requests_say_what_is_wrong_and_make_nothing(pool, vlans, message):
    with pytest.raises(CommandError, match=message):
        call_command("add_segments", pool, vlans)
    assert not Network.objects.exists()


def test_overlapping_or_taken_vlans_are_refused():
    call_command("add_segments", "10.50.0.0/16", "100")
    with pytest.raises(CommandError, match=r"overlaps the existing network 10\.50\.0\.0/24"):
        call_command("add_segments", "10.50.0.0/16", "200")
    with pytest.raises(CommandError, match="VLAN 100 already has a network"):
        call_command("add_segments", "10.60.0.0/16", "100")
    assert Network.objects.count() == 1
