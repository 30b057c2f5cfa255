"""Production: everything secret or site-specific comes from the environment.

Passes ``manage.py check --deploy`` with no warnings when SECRET_KEY and ALLOWED_HOSTS are set.
"""

from django.core.exceptions import ImproperlyConfigured

from portal.env import envbool, envint

from .base import *  # noqa: F403
from .base import ALLOWED_HOSTS, SECRET_KEY

if len(SECRET_KEY) < 50:
    raise ImproperlyConfigured("SECRET_KEY (or SECRET_KEY_FILE) must hold at least 50 characters")
if not ALLOWED_HOSTS:
    raise ImproperlyConfigured("ALLOWED_HOSTS must name the host names the portal answers on")

DEBUG = False
SECURE_SSL_REDIRECT = envbool("SECURE_SSL_REDIRECT", True)
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SECURE_HSTS_SECONDS = envint("SECURE_HSTS_SECONDS", 31536000)
SECURE_HSTS_INCLUDE_SUBDOMAINS = True
SECURE_HSTS_PRELOAD = True
SESSION_COOKIE_SECURE = True
CSRF_COOKIE_SECURE = True
SESSION_COOKIE_HTTPONLY = True
X_FRAME_OPTIONS = "DENY"
SECURE_REFERRER_POLICY = "same-origin"
