"""The Content-Security-Policy in a real browser (Playwright on Debian's Chromium): a script
slipped into a portal page does not run and is reported, while the portal's own pages (htmx
included) and the API docs work with no violation at all."""

import pytest
from django.core.management import call_command

from apps.web.tests.browsing import sign_in

pytestmark = pytest.mark.django_db(transaction=True)
# Collects every violation the page reports; init scripts run outside the page's CSP.
WATCH_VIOLATIONS = """
window.__violations = [];
document.addEventListener("securitypolicyviolation", (e) => window.__violations.push(
    {directive: e.effectiveDirective, blocked: e.blockedURI, sample: e.sample}));
"""
INJECTED = (
    b'<script>window.__injected = true; document.title = "owned";</script>'
    b'<img src="/static/none.png" onerror="window.__handler = true">'
)


@pytest.fixture
def page(browser, live_server):
    context = browser.new_context(base_url=live_server.url)
    context.set_default_timeout(10_000)
    context.add_init_script(WATCH_VIOLATIONS)
    page = context.new_page()
    page.console_messages = []
    page.on("console", lambda message: page.console_messages.append(message.text))
    yield page
    context.close()


@pytest.fixture
def context_grants(page):
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])


def violations(page) -> list[dict]:
    return page.evaluate("window.__violations")


def test_a_script_injected_into_a_portal_page_does_not_run_and_is_reported(page):
    def inject(route):
        response = route.fetch()  # the portal's real answer, with its real headers
        assert "script-src 'self'" in response.headers["content-security-policy"]
        body = response.body().replace(b"</main>", INJECTED + b"</main>")
        route.fulfill(response=response, body=body)

    page.route("**/accounts/login/", inject)
    page.goto("/accounts/login/")
    page.wait_for_function("window.__violations.length >= 2")

    assert page.evaluate("window.__injected") is None
    assert page.evaluate("window.__handler") is None
    assert page.title() == "Sign in · Platter"
    assert {v["directive"] for v in violations(page)} == {"script-src-elem", "script-src-attr"}
    assert any("Content Security Policy" in text for text in page.console_messages)
    # The page's own scripts, from our static files, did run.
    assert page.evaluate("typeof htmx") == "object"
    assert page.evaluate("htmx.config.includeIndicatorStyles") is False


def test_the_portals_own_pages_run_under_the_policy_without_a_violation(
    page, alice, context_grants
):
    call_command("load_catalog", verbosity=0)
    sign_in(page, "alice", "alice-pass-123")
    page.goto("/catalog/")
    page.get_by_role("link", name="Launch Demo cluster 1.0").click()
    page.get_by_label("Size").fill("1")  # htmx asks the server for a new preview
    page.locator("#preview").get_by_text("1 master, 1 worker").wait_for()

    page.goto("/tokens/")
    page.get_by_label("Name").fill("laptop")
    page.get_by_role("button", name="Create token").click()
    page.get_by_role("button", name="Copy").click()  # static/web/copy.js, no inline handler
    page.get_by_role("button", name="Copied").wait_for()
    assert page.evaluate("navigator.clipboard.readText()").startswith("plt_")
    assert violations(page) == []


def test_the_api_docs_render_under_their_own_policy(page, alice):
    sign_in(page, "alice", "alice-pass-123")
    page.goto("/api/v1/docs/")
    page.locator(".swagger-ui .opblock").first.wait_for()
    assert violations(page) == []

    page.goto("/api/v1/redoc/")
    page.get_by_role("heading", name="Platter API").first.wait_for()
    # Redoc's page links Google's fonts and Redocly's logo: blocked on purpose (no CDN); nothing
    # of ours (inline code, our files, blob: workers) is.
    assert all(v["blocked"].startswith("https://") for v in violations(page)), violations(page)
