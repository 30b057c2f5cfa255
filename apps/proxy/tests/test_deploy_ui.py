"""Production's UI domain: compose hands it to the portal and the reverse proxy, and Caddy
serves the wildcard name with its certificate to the portal."""

import os
import subprocess
import sys
from pathlib import Path

import yaml

BASE_DIR = Path(__file__).resolve().parents[3]


def test_compose_and_caddy_serve_the_wildcard_ui_domain():
    compose = yaml.safe_load((BASE_DIR / "compose.yaml").read_text())
    web = compose["services"]["web"]["environment"]
    assert web["PLATTER_UI_DOMAIN"].startswith("${PLATTER_UI_DOMAIN:?")
    assert web["PLATTER_PORTAL_URL"] == "https://${PLATTER_HOSTNAME}"
    proxy = compose["services"]["proxy"]
    assert proxy["environment"]["PLATTER_UI_DOMAIN"] == "${PLATTER_UI_DOMAIN}"
    assert "./secrets/ui-certificate:/etc/caddy/ui-certificate:ro" in proxy["volumes"]
    caddyfile = (BASE_DIR / "deploy" / "Caddyfile").read_text()
    # The site block: up to the closing brace at the start of a line (inner blocks indent).
    block = caddyfile.split("*.{$PLATTER_UI_DOMAIN} {", 1)[1].split("\n}", 1)[0]
    assert "tls /etc/caddy/ui-certificate/fullchain.pem" in block
    assert "reverse_proxy web:8000" in block
    assert "/srv/static" not in block  # a UI host serves no portal file


def test_production_accepts_the_ui_hosts_and_keeps_its_cookies_host_only():
    probe = (
        "from django.conf import settings as s; "
        "print(s.UI_DOMAIN, s.ALLOWED_HOSTS, s.SESSION_COOKIE_DOMAIN, s.CSRF_COOKIE_DOMAIN, "
        "s.UI_COOKIE_NAME)"
    )
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("PLATTER_", "ALLOWED"))},
        "DJANGO_SETTINGS_MODULE": "portal.settings.prod",
        "SECRET_KEY": "x7" * 30 + "-production-secret-for-the-ui-domain",
        "ALLOWED_HOSTS": "platter.example.org",
        "PLATTER_UI_DOMAIN": "UI.platter.example.org.",
    }
    shown = subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", probe],
        cwd=BASE_DIR,
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.split("\n")[-2] == (
        "ui.platter.example.org ['platter.example.org', '.ui.platter.example.org'] None None "
        "__Host-platter-ui"
    )
