"""The admin records a revision when a version's definition is saved, and shows the history
(number, date, by whom, clusters using it) and what changed."""

import json

import pytest
from django.urls import reverse

from apps.catalog.models import ProductVersion
from apps.catalog.options import resolve
from apps.catalog.services import load_catalog
from apps.clusters.services import create_cluster

pytestmark = pytest.mark.django_db


@pytest.fixture
def demo(client, admin_user) -> ProductVersion:
    client.force_login(admin_user)
    load_catalog()
    return ProductVersion.objects.get(product__name="demo")


def form_of(version: ProductVersion, **changes) -> dict:
    form = {
        "product": version.product_id,
        "version": version.version,
        "description": version.description,
        "image": version.image,
        "disk_kind": version.disk_kind,
        "enabled": "on",
        **{
            name: json.dumps(getattr(version, name))
            for name in ("roles", "options_schema", "ports", "environment", "configure")
        },
        "capabilities": json.dumps(version.capabilities),
    }
    form.update(changes)
    return form


def test_it_records_revisions_on_save_and_shows_history_and_diff(client, admin_user, demo, alice):
    url = reverse("admin:catalog_productversion_change", args=[demo.pk])
    assert b"none yet" in client.get(url).content
    create_cluster(alice, demo, "kept", resolve(demo, {}).instances)  # revision 1, by a launch

    # A save that changes nothing in the definition records nothing.
    assert client.post(url, form_of(demo, description="new words")).status_code == 302
    assert demo.revisions.count() == 1

    environment = json.dumps({**demo.environment, "PLATTER_EXTRA": "added"})
    assert client.post(url, form_of(demo, environment=environment)).status_code == 302
    latest = demo.revisions.order_by("-number").first()
    assert latest.number == 2 and latest.created_by == admin_user

    page = client.get(url).content.decode()
    history = page[page.index('class="revision-history"') :]
    rows = history[: history.index("</table>")].split("<tr>")[2:]
    assert len(rows) == 2
    assert (
        ">2</a>" in rows[0] and "<td>admin</td><td>0</td>" in rows[0]
    )  # by the admin, no cluster on it yet
    assert ">1</a>" in rows[1] and "<td>-</td><td>1</td>" in rows[1]  # the launch's, 1 cluster
    diff = page[page.index('class="revision-diff"') :]
    assert "--- revision 1" in diff and "+++ revision 2" in diff
    assert "+    &quot;PLATTER_EXTRA&quot;: &quot;added&quot;" in diff

    # Each revision has a read-only page with its definition and its own diff.
    revision_url = reverse("admin:catalog_productrevision_change", args=[latest.pk])
    shown = client.get(revision_url)
    assert shown.status_code == 200
    assert b"PLATTER_EXTRA" in shown.content and b"+++ revision 2" in shown.content
    assert b'name="_save"' not in shown.content  # nothing to save: revisions never change
    delete_url = reverse("admin:catalog_productrevision_delete", args=[latest.pk])
    assert client.post(delete_url, {"post": "yes"}).status_code == 403
    assert demo.revisions.count() == 2
