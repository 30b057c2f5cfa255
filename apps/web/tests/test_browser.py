"""The web self-service in a real browser: Playwright driving Debian's Chromium against the
live server, with the real Celery worker and the lab's nodes for the end-to-end launch.
Screenshots of the main pages go to artifacts/web/ (not committed)."""

import re
from pathlib import Path

import pytest
from django.conf import settings

from apps.clusters import services
from apps.clusters.models import Cluster, DiskAllocation
from apps.web.tests.browsing import sign_in

pytestmark = pytest.mark.django_db(transaction=True)
SHOTS = Path(settings.BASE_DIR) / "artifacts" / "web"


def shot(page, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=SHOTS / f"{name}.png", full_page=True)


def test_demo_launches_watches_it_run_and_destroys_it(
    page, seeded, dispatching, lab_inventory, lab_cleanup
):
    sign_in(page, "demo", "demo-platter")
    page.get_by_role("link", name="Catalog", exact=True).click()
    shot(page, "catalog")
    page.get_by_role("link", name="Launch Demo cluster 1.0").click()

    page.get_by_label("Name").fill("web-demo")
    page.get_by_label("Size").fill("1")  # htmx refreshes the preview as the user types
    preview = page.locator("#preview")
    preview.get_by_text("1 master, 1 worker").wait_for()
    assert "Within your quota." in preview.inner_text()
    shot(page, "launch")
    page.get_by_role("button", name="Launch").click()

    page.wait_for_url(re.compile(r"/clusters/\d+/$"))
    cluster = Cluster.objects.get(name="web-demo")
    badge = page.locator("#cluster-live > p [data-testid=state]")
    badge.filter(has_text="running").wait_for(timeout=90_000)  # htmx polling, no reload
    assert page.get_by_text("configured").count() or page.locator(".events li").count() > 2
    page.locator("details.instance summary", has_text="master-0").click()  # its details
    details = page.locator("details.instance[open]")
    assert "/data/1" in details.inner_text()
    shot(page, "cluster")
    page.get_by_role("link", name="My clusters", exact=True).click()
    shot(page, "clusters")
    page.get_by_role("link", name="web-demo").click()

    page.get_by_role("link", name="Destroy…").click()
    page.get_by_label("Wipe it").check()
    page.get_by_role("button", name="Destroy web-demo").click()
    badge.filter(has_text="destroyed").wait_for(timeout=60_000)
    assert not DiskAllocation.objects.filter(instance__cluster=cluster, active=True).exists()


def test_an_over_quota_launch_shows_the_quota_message_and_creates_nothing(page, seeded):
    sign_in(page, "demo", "demo-platter")
    page.goto("/catalog/demo/1.0/launch")
    page.get_by_label("Size").fill("8")  # 9 instances; the demo quota allows 8
    page.locator("#preview").get_by_text("Over your quota").wait_for()
    page.get_by_role("button", name="Launch").click()
    alert = page.get_by_role("alert")
    assert "the quota of user demo is 8 instances" in alert.inner_text()
    shot(page, "launch-over-quota")
    assert not Cluster.objects.exists()


def test_a_second_user_cannot_open_the_first_users_cluster(page, seeded, django_user_model):
    from apps.catalog.models import ProductVersion

    demo = django_user_model.objects.get(username="demo")
    version = ProductVersion.objects.get(product__name="demo")
    cluster = services.launch(demo, version, "private", {"size": 1})
    django_user_model.objects.create_user("carol", password="carol-pass-123")

    sign_in(page, "carol", "carol-pass-123")
    response = page.goto(f"/clusters/{cluster.id}/")
    assert response.status == 404
    page.goto("/clusters/")
    assert "private" not in page.inner_text("main")

    sign_in(page, "demo", "demo-platter")
    page.goto("/quota/")
    shot(page, "quota")
    page.goto("/tokens/")
    shot(page, "tokens")
    sign_in(page, "admin", "admin-platter")
    page.goto("/capacity/")
    shot(page, "capacity")
