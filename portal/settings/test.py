"""Tests: the same real services as development."""

from portal.env import envbool, envint, envstr

from .dev import *  # noqa: F403
from .dev import DATABASES, REDIS_URL

DEBUG = False
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]  # fast persona set-up
# Parallel test runs (several checkouts or helpers) each get a database of their own.
DATABASES["default"]["TEST"] = {"NAME": envstr("PLATTER_TEST_DB", "test_platter")}
# pytest-xdist's processes (`./platter test --fast` runs the fast tier on several) each get one
# too: pytest-django suffixes the database name with the process's id (gw0, gw1, ...), and below
# the site name and the Redis database follow it, so no process sees another's rows or keys.
XDIST_WORKER = envstr("PYTEST_XDIST_WORKER", "")
# ...and a site name of their own on the lab's nodes: their containers and data folders never
# meet, and one run's reconciler never removes another's containers.
PLATTER_SITE = envstr(
    "PLATTER_SITE",
    "-".join(filter(None, [DATABASES["default"]["TEST"]["NAME"].replace("_", "-"), XDIST_WORKER])),
)

# A Redis database of its own, so a running `./platter run` worker never takes test tasks.
_TEST_REDIS_DB = envint("PLATTER_TEST_REDIS_DB", 1)
if XDIST_WORKER:
    # Databases 16 and up are the xdist processes' (the local Redis has 64): 4 per run's own
    # database number, so the fast tiers of two checkouts (1 and 5, say) never share one.
    _TEST_REDIS_DB = 16 + (_TEST_REDIS_DB % 12) * 4 + int(XDIST_WORKER.removeprefix("gw")) % 4
_TEST_REDIS_URL = REDIS_URL.rsplit("/", 1)[0] + "/" + str(_TEST_REDIS_DB)
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
