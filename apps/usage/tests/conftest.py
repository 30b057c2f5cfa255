import pytest

from apps.clusters.tests.factories import make_network


@pytest.fixture(autouse=True)
def network(db):
    """The addresses the reservation hands out."""
    return make_network()
