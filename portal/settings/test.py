"""Tests: the same real services as development."""

from portal.env import envstr

from .dev import *  # noqa: F403
from .dev import DATABASES

DEBUG = False
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]  # fast persona set-up
# Parallel test runs (several checkouts or helpers) each get a database of their own.
DATABASES["default"]["TEST"] = {"NAME": envstr("PLATTER_TEST_DB", "test_platter")}
