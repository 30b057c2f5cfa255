"""My clusters in a real browser (Chromium): the state filter and the page links swap the rows
through htmx and put the choice in the address, so a reload shows the same list."""

import pytest
from django.contrib.auth import get_user_model

from apps.clusters.models import Cluster
from apps.clusters.tests.factories import make_version
from apps.web.tests.browsing import sign_in

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_filter_and_pages_swap_the_rows_and_stay_in_the_address(page):
    carol = get_user_model().objects.create_user("carol", password="carol-pass-123")
    version = make_version()
    for n in range(27):
        Cluster.objects.create(owner=carol, version=version, name=f"up-{n}", state="running")
    Cluster.objects.create(owner=carol, version=version, name="gone", state="destroyed")
    sign_in(page, "carol", "carol-pass-123")
    page.goto("/clusters/")
    rows = page.locator("#cluster-rows tbody tr")
    assert rows.count() == 25
    assert "gone" not in page.inner_text("#cluster-rows")

    page.get_by_role("navigation", name="Pages of clusters").get_by_role("link", name="2").click()
    page.wait_for_url("**/clusters/?state=live&page=2")
    page.get_by_text("26\N{EN DASH}27 of 27").wait_for()
    assert rows.count() == 2

    page.get_by_label("Show").select_option(label="Destroyed")
    page.wait_for_url("**/clusters/?state=destroyed")
    page.locator("#cluster-rows").get_by_role("link", name="gone").wait_for()
    assert rows.count() == 1
    page.reload()
    assert page.get_by_label("Show").input_value() == "destroyed"
    assert page.locator("#cluster-rows tbody tr").count() == 1
