"""Fixtures the resize tests and the notebook tests (a notebook is added by a resize) share: a
test module that defines one of these names keeps its own."""

import pytest
from django.core.management import call_command

from apps.clusters.tests.factories import make_network, make_node
from apps.nodes.fake import FakeNodes


@pytest.fixture
def fake_nodes():
    with FakeNodes() as fake:
        yield fake


@pytest.fixture
def pool():
    """Three nodes of 4 HDDs and 4 SSDs on a network."""
    make_network()
    return [make_node(disks={"hdd": 4, "ssd": 4}) for _ in range(3)]


@pytest.fixture
def catalog():
    call_command("load_catalog", verbosity=0)
