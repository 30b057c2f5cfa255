"""The cluster page's Connect section: strings to copy, the credentials for the owner only."""

import pytest
from django.urls import reverse

from apps.catalog.services import load_catalog
from apps.clusters import credentials
from apps.clusters.tests.test_connection import launched

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def catalog(db):
    load_catalog()


def test_the_owner_sees_the_strings_and_the_credentials(client, alice):
    cluster = launched(alice, "mongodb", "ferretdb-1.24")
    made = credentials.ensure_credentials(cluster)
    client.force_login(alice)

    page = client.get(reverse("web:cluster", args=[cluster.id])).content.decode()

    ip = cluster.instances.get().address.ip
    assert f"mongodb://alice:{made.password}@{ip}:27017/" in page
    assert f'<code class="copy">{made.secret}</code>' in page


def test_another_user_gets_404_without_a_trace_of_the_secret(client, alice, bob):
    cluster = launched(alice, "spark", "4.3.0")
    made = credentials.ensure_credentials(cluster)
    client.force_login(bob)

    response = client.get(reverse("web:cluster", args=[cluster.id]))

    assert response.status_code == 404 and made.secret not in response.content.decode()
