import pytest
from django.urls import reverse

from apps.catalog.models import ProductVersion
from apps.catalog.services import load_catalog

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_client_(client, admin_user):
    client.force_login(admin_user)
    load_catalog()
    return client


def test_it_lists_products_and_versions_with_filters(admin_client_):
    assert b"hadoop" in admin_client_.get(reverse("admin:catalog_product_changelist")).content
    page = admin_client_.get(
        reverse("admin:catalog_productversion_changelist"), {"enabled__exact": "1"}
    )
    assert page.status_code == 200
    assert b"platter/hadoop:3.4.2" in page.content and b"By trusted" in page.content


def test_it_renders_the_change_pages(admin_client_):
    version = ProductVersion.objects.get(product__name="demo")
    page = admin_client_.get(reverse("admin:catalog_productversion_change", args=[version.pk]))
    assert page.status_code == 200
    assert b"Options as users see them" in page.content and b"&quot;required&quot;" in page.content
    page = admin_client_.get(reverse("admin:catalog_product_change", args=[version.product_id]))
    assert page.status_code == 200 and b"platter/lab-base:1" in page.content


def test_it_shows_schema_errors_instead_of_saving(admin_client_):
    version = ProductVersion.objects.get(product__name="demo")
    url = reverse("admin:catalog_productversion_change", args=[version.pk])
    form = {
        "product": version.product_id,
        "version": version.version,
        "description": version.description,
        "image": version.image,
        "disk_kind": version.disk_kind,
        "enabled": "on",
        "roles": '[{"name": "master", "min": 3, "max": 1, "default": 1}]',
        "options_schema": "{}",
        "ports": "[]",
        "environment": "{}",
        "configure": "[]",
        "capabilities": "[]",
    }
    page = admin_client_.post(url, form)
    assert page.status_code == 200  # the form again, not a redirect
    assert b"needs min &lt;= default &lt;= max" in page.content
    version.refresh_from_db()
    assert version.roles[0]["min"] == 1
