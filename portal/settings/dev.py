"""Development: works with no environment at all, against the project's own services."""

from portal.env import envbool, envlist, envstr

from .base import *  # noqa: F403

SECRET_KEY = envstr("SECRET_KEY", "dev-only-insecure-key-do-not-use-in-production")
DEBUG = envbool("DEBUG", True)
ALLOWED_HOSTS = envlist("ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]"])
