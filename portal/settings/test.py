"""Tests: the same real services as development."""

from portal.env import envbool, envint, envstr

from .dev import *  # noqa: F403
from .dev import DATABASES, REDIS_URL

DEBUG = False
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]  # fast persona set-up
# Parallel test runs (several checkouts or helpers) each get a database of their own.
DATABASES["default"]["TEST"] = {"NAME": envstr("PLATTER_TEST_DB", "test_platter")}
# ...and a site name of their own on the lab's nodes: their containers and data folders never
# meet, and one run's reconciler never removes another's containers.
PLATTER_SITE = envstr("PLATTER_SITE", DATABASES["default"]["TEST"]["NAME"].replace("_", "-"))

# A Redis database of its own, so a running `./platter run` worker never takes test tasks.
_TEST_REDIS_URL = REDIS_URL.rsplit("/", 1)[0] + "/" + envstr("PLATTER_TEST_REDIS_DB", "1")
CELERY_BROKER_URL = CELERY_RESULT_BACKEND = _TEST_REDIS_URL
CACHES = {
    "default": {
        "BACKEND": "portal.cache.SharedRedisCache",
        "LOCATION": _TEST_REDIS_URL,
    }
}

# ...and a slice of the lab's subnet of its own (the dev portal uses slice 0).
LAB_ADDRESS_SLOT = envint("PLATTER_LAB_ADDRESS_SLOT", int(envstr("PLATTER_TEST_REDIS_DB", "1")) % 8)

# Only tests that run a real worker dispatch cluster tasks (see conftest's `dispatching`).
DISPATCH_CLUSTER_TASKS = envbool("PLATTER_DISPATCH_CLUSTER_TASKS", False)

# Most tests place clusters on nodes made by factories, which list no images; the tests of the
# image check (apps/api/tests/test_launch_images.py) turn pulls off as development has them.
IMAGE_PULLS = envbool("PLATTER_IMAGE_PULLS", True)
