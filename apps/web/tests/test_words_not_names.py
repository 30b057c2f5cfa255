"""Messages and labels users read name things in words, not by internal names (option keys,
quota fields, model classes)."""

import pytest
from django.urls import reverse

from apps.accounts.models import Quota
from apps.catalog.models import ProductVersion
from apps.catalog.services import load_catalog
from apps.clusters.tests.factories import make_roomy_node

pytestmark = pytest.mark.django_db
HTMX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def demo(db) -> ProductVersion:
    load_catalog()
    make_roomy_node()
    return ProductVersion.objects.get(product__name="demo", version="1.0")


def test_the_preview_names_bad_options_by_their_labels(as_alice, demo):
    url = reverse("web:preview", args=["demo", "1.0"])
    html = as_alice.get(url, {"cpu": 999, "disk_kind": "floppy"}, **HTMX).content.decode()
    assert "Fix these first" in html
    assert "<strong>Cores per instance</strong>" in html
    assert "<strong>Disk kind</strong>" in html
    assert "<strong>cpu</strong>" not in html and "<strong>disk_kind</strong>" not in html


def test_quota_refusals_and_bars_are_in_words(as_alice, alice, demo):
    Quota.objects.create(user=alice, max_instances=2, max_disks_ssd=4)
    response = as_alice.post(
        reverse("web:launch", args=["demo", "1.0"]), {"name": "big", "size": 4}
    )
    html = response.content.decode()
    assert "Over your quota: the quota of user alice is 2 instances: 0 in use, 5 more asked" in html
    assert "max_instances" not in html
    quota = as_alice.get(reverse("web:quota")).content.decode()
    assert 'id="limit-1-max_disks_ssd">SSD disks</span>' in quota  # the id is not shown
    assert "disks ssd" not in quota.lower()
