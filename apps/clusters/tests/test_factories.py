"""make_nodes makes the nodes make_node makes, only in fewer statements."""

import pytest

from apps.inventory.models import Disk

from .factories import make_node, make_nodes

pytestmark = pytest.mark.django_db


def shape(node) -> tuple:
    disks = Disk.objects.filter(node=node).order_by("mount_path")
    return (
        node.endpoint,
        node.cores,
        node.memory_mb,
        node.state,
        [(d.mount_path, d.kind, d.capacity_bytes, d.state) for d in disks],
    )


def test_make_nodes_makes_what_make_node_makes():
    kwargs = {"cores": 64, "memory_mb": 1 << 20, "disks": {"hdd": 2, "ssd": 1}, "state": "down"}
    one = make_node(**kwargs)
    many = make_nodes(3, **kwargs)

    assert len({n.name for n in [one, *many]}) == 4
    assert [shape(n) for n in many] == [shape(one)] * 3
    assert shape(make_nodes(1)[0]) == shape(make_node())  # the defaults agree too
