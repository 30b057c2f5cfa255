"""Development: works with no environment at all, against the project's own services."""

from portal.env import envbool, envint, envlist, envstr

from .base import *  # noqa: F403
from .base import LAB_FIO_IMAGE, LAB_IMAGE

SECRET_KEY = envstr("SECRET_KEY", "dev-only-insecure-key-do-not-use-in-production")
DEBUG = envbool("DEBUG", True)
ALLOWED_HOSTS = envlist("ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]"])

# The lab has no registry: helper containers use the lab's own busybox image.
NODE_HELPER_IMAGE = envstr("PLATTER_NODE_HELPER_IMAGE", LAB_IMAGE)
# ...and the lab's fio image; lab disks are 1 GiB, so benchmark files are 1/16 of the paper's.
BENCH_IMAGE = envstr("PLATTER_BENCH_IMAGE", LAB_FIO_IMAGE)
BENCH_SIZE_DIVISOR = envint("PLATTER_BENCH_SIZE_DIVISOR", 16)
BENCH_RUNTIME_S = envint("PLATTER_BENCH_RUNTIME_S", 2)
# No registry either: launches need an image some node already has (the lab builds them).
IMAGE_PULLS = envbool("PLATTER_IMAGE_PULLS", False)
