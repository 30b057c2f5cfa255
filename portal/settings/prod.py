"""Production: everything secret or site-specific comes from the environment.

Secrets (SECRET_KEY, DATABASE_URL, REDIS_URL, PLATTER_METRICS_TOKEN) are read from
``NAME_FILE`` when it is set (e.g. /run/secrets/...), else from ``NAME``; none has a default
here, and the development key is refused. Passes ``manage.py check --deploy --fail-level
WARNING`` when SECRET_KEY and ALLOWED_HOSTS are set.
"""

from django.core.exceptions import ImproperlyConfigured

from portal.cookies import host_only_name
from portal.env import envbool, envint

from .base import *  # noqa: F403
from .base import ALLOWED_HOSTS, SECRET_KEY, UI_DOMAIN

# Keys that must never sign production sessions: dev.py's and Django's startproject ones.
_PUBLIC_KEY_MARKERS = ("dev-only", "insecure")

if len(SECRET_KEY) < 50:
    raise ImproperlyConfigured("SECRET_KEY (or SECRET_KEY_FILE) must hold at least 50 characters")
if any(marker in SECRET_KEY for marker in _PUBLIC_KEY_MARKERS):
    raise ImproperlyConfigured("SECRET_KEY is a development key; generate a secret one")
if not ALLOWED_HOSTS:
    raise ImproperlyConfigured("ALLOWED_HOSTS must name the host names the portal answers on")
# The clusters' web UI hosts (c<N>.<PLATTER_UI_DOMAIN>), each an origin of its own.
if UI_DOMAIN:
    ALLOWED_HOSTS = [*ALLOWED_HOSTS, f".{UI_DOMAIN}"]
# Refused rather than ignored, so a deployment that asks for it finds out at once.
if envbool("DEBUG", False):
    raise ImproperlyConfigured("DEBUG is never on in production: unset DEBUG")

DEBUG = False

# HTTPS only: plain HTTP is redirected (the proxy in front says which scheme the client used),
# browsers are told to never try HTTP again, and cookies never travel without TLS. The health
# check stays reachable over plain HTTP for load balancers.
SECURE_SSL_REDIRECT = envbool("SECURE_SSL_REDIRECT", True)
SECURE_REDIRECT_EXEMPT = [r"^healthz$"]
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SECURE_HSTS_SECONDS = envint("SECURE_HSTS_SECONDS", 31536000)
SECURE_HSTS_INCLUDE_SUBDOMAINS = True
SECURE_HSTS_PRELOAD = True
SESSION_COOKIE_SECURE = True
CSRF_COOKIE_SECURE = True
# __Host- names, as the cookies are Secure (portal.cookies says why): the browser takes them
# only host-only, Secure and for "/", so a tenant's page on a UI host (the same site) can
# neither plant a session or CSRF token for the portal nor a cookie for another cluster's host.
SESSION_COOKIE_NAME = host_only_name("sessionid", SESSION_COOKIE_SECURE)
CSRF_COOKIE_NAME = host_only_name("csrftoken", CSRF_COOKIE_SECURE)
UI_COOKIE_NAME = host_only_name("platter-ui", SESSION_COOKIE_SECURE)
SESSION_COOKIE_HTTPONLY = True
X_FRAME_OPTIONS = "DENY"
SECURE_REFERRER_POLICY = "same-origin"
SECURE_CONTENT_TYPE_NOSNIFF = True

# Logs as JSON lines for the log collector unless PLATTER_LOG_FORMAT says otherwise (plain).
from portal.env import envstr  # noqa: E402

from .base import LOGGING  # noqa: E402

LOG_FORMAT = envstr("PLATTER_LOG_FORMAT", "json")
LOGGING["handlers"]["console"]["formatter"] = LOG_FORMAT
