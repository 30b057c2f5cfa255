"""Bad input on the web pages is a message or a 400, never a server error."""

import pytest
from django.test import Client

from apps.api.tests.conftest import make_cluster
from apps.clusters.tests.factories import make_network, make_node


@pytest.fixture
def raw():
    """A client that answers a server error as a 500 instead of raising it in the test."""
    return Client(raise_request_exception=False)


@pytest.fixture
def demo(db):
    from apps.catalog.models import ProductVersion
    from apps.catalog.services import load_catalog

    load_catalog()
    make_network()
    make_node(cores=64, memory_mb=65536, disks={"hdd": 24, "ssd": 8})  # where it could run
    return ProductVersion.objects.get(product__name="demo", version="1.0")


def test_a_nul_byte_in_a_page_path_is_a_400_page(raw, alice):
    raw.force_login(alice)
    response = raw.get("/catalog/demo/%00/launch")
    assert response.status_code == 400 and b"NUL" in response.content


def test_web_extend_refuses_nan_and_infinity(raw, alice, demo):
    cluster = make_cluster(alice, demo, size=1)
    raw.force_login(alice)
    for hours in ["nan", "inf", "-inf", "1e308", "9" * 5000]:
        response = raw.post(f"/clusters/{cluster.id}/extend", {"hours": hours}, follow=True)
        assert response.status_code == 200, hours
        assert "Give the extension in hours" in response.content.decode()
    cluster.refresh_from_db()
    assert cluster.expires_at is None
