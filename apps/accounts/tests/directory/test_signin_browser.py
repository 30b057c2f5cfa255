"""Both directory sign-ins in a real browser (Debian's Chromium) on the live server: the form
with a directory password against slapd, and the button through the OpenID Connect provider
and back."""

import pytest

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def page(browser, live_server):
    context = browser.new_context(base_url=live_server.url)
    context.set_default_timeout(10_000)
    yield context.new_page()
    context.close()


def test_a_directory_user_signs_in_with_the_form(page, ldap_on):
    page.goto("/accounts/login/")
    page.get_by_label("Username").fill("dora")
    page.get_by_label("Password").fill("dora-dir-pass")
    page.get_by_role("button", name="Sign in").click()

    assert page.get_by_text("Signed in as").inner_text() == "Signed in as dora"


def test_a_user_signs_in_with_the_providers_button(page, oidc_on):
    oidc_on.claims = {"sub": "1", "preferred_username": "dora", "groups": ["physics"]}
    page.goto("/accounts/login/?next=/ssh-keys/")
    page.get_by_role("link", name="Sign in with Example ID").click()

    assert page.get_by_text("Signed in as").inner_text() == "Signed in as dora"
    assert page.url.endswith("/ssh-keys/")
