"""Development: works with no environment at all, against the project's own services."""

import os
from pathlib import Path

from apps.lab.place import saved as saved_lab_place
from portal.env import envbool, envint, envlist, envstr

from .base import *  # noqa: F403
from .base import INSTALLED_APPS, STATE_DIR

# Development only: the lab of nodes on this machine, the demo logins (seed_demo), the fault
# suite and `./platter` itself. Production (prod.py) never installs it.
INSTALLED_APPS = [*INSTALLED_APPS, "apps.lab"]

# The lab: one machine standing in for several Platter nodes (see apps/lab).
LAB_NODES = envint("PLATTER_LAB_NODES", 3)
LAB_DISKS_PER_NODE = envint("PLATTER_LAB_DISKS", 6)
LAB_DISK_SIZE_MB = envint("PLATTER_LAB_DISK_SIZE_MB", 1024)
LAB_DISK_FS = envstr("PLATTER_LAB_DISK_FS", "ext4")
# The last disks of each lab node are labelled SSD so HDD/SSD choices can be tried.
LAB_SSD_PER_NODE = envint("PLATTER_LAB_SSD_PER_NODE", 2)
LAB_SSH_NODE = envbool("PLATTER_LAB_SSH_NODE", True)
# Where on this machine the lab sits: the place ./platter chose for this checkout, so a second
# checkout's lab (CI's clone) never takes the first one's addresses (apps/lab/place.py).
LAB_PLACE = saved_lab_place(STATE_DIR)
LAB_ADDRESS_PREFIX = envstr("PLATTER_LAB_ADDRESS_PREFIX", LAB_PLACE.address_prefix)
LAB_SUBNET = envstr("PLATTER_LAB_SUBNET", "10.213.0.0/24")
# Which slice of LAB_SUBNET this portal's lab network hands out (0-7): test runs sharing the
# lab use their own slice (see test.py), so their addresses never collide with the dev portal.
LAB_ADDRESS_SLOT = envint("PLATTER_LAB_ADDRESS_SLOT", 0)
# Cluster networks: a /24 per segment (one bridge each, standing for a site's VLAN), as many
# per portal slot as clusters it may hold at once (see apps/lab/segments.py).
LAB_SEGMENTS_SUBNET = envstr("PLATTER_LAB_SEGMENTS_SUBNET", LAB_PLACE.segments_subnet)
LAB_SEGMENTS_PER_SLOT = envint("PLATTER_LAB_SEGMENTS_PER_SLOT", 8)
LAB_IMAGE = envstr("PLATTER_LAB_IMAGE", "platter/lab-base:1")
# Product images `lab up` builds on every node: "*" is every product with an image recipe
# (PRODUCTS in apps/products/images/, from the registry); "" for none; or a list of names.
LAB_PRODUCTS = envlist("PLATTER_LAB_PRODUCTS", ["*"])
# The lab registry's storage (apps/lab/registry.py): a cache of product images keyed by their
# recipes' content, kept by `lab down` and shared by every checkout on the machine (as pip's
# and Maven's caches are), so a later `lab up` anywhere here pulls what is unchanged.
LAB_IMAGE_CACHE_DIR = envstr(
    "PLATTER_LAB_IMAGE_CACHE_DIR",
    str(Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "platter"),
)
# The lab's fio image: the host's fio and its libraries on top of the base image.
LAB_FIO_IMAGE = envstr("PLATTER_LAB_FIO_IMAGE", "platter/lab-fio:1")
# Per-disk write cap (MB/s) that emulates a spindle; 0 means uncapped.
LAB_DISK_BPS_MB = envint("PLATTER_LAB_DISK_BPS_MB", 0)

SECRET_KEY = envstr("SECRET_KEY", "dev-only-insecure-key-do-not-use-in-production")
DEBUG = envbool("DEBUG", True)
ALLOWED_HOSTS = envlist("ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]"])
# Web UIs on c<N>.ui.localhost at the portal's port (Chromium and Firefox resolve every
# *.localhost name to loopback): an origin per cluster, as production's wildcard domain.
UI_DOMAIN = envstr("PLATTER_UI_DOMAIN", "ui.localhost").strip(".").lower()
if UI_DOMAIN:
    ALLOWED_HOSTS = [*ALLOWED_HOSTS, f".{UI_DOMAIN}"]

# The lab has no registry: helper containers use the lab's own busybox image.
NODE_HELPER_IMAGE = envstr("PLATTER_NODE_HELPER_IMAGE", LAB_IMAGE)
# The lab's firewall helper: the base image plus the host's nft (apps/lab/image.py).
LAB_FIREWALL_IMAGE = envstr("PLATTER_LAB_FIREWALL_IMAGE", "platter/lab-nft:1")
NODE_FIREWALL_IMAGE = envstr("PLATTER_NODE_FIREWALL_IMAGE", LAB_FIREWALL_IMAGE)
# ...and the lab's fio image; lab disks are 1 GiB, so benchmark files are 1/16 of the paper's.
BENCH_IMAGE = envstr("PLATTER_BENCH_IMAGE", LAB_FIO_IMAGE)
BENCH_SIZE_DIVISOR = envint("PLATTER_BENCH_SIZE_DIVISOR", 16)
BENCH_RUNTIME_S = envint("PLATTER_BENCH_RUNTIME_S", 2)
# Every container's writable layer is capped, as production should: the lab's data-roots
# enforce it (btrfs quota groups count the image's files too, so it sits above the
# largest product image, about 1 GB).
CONTAINER_ROOTFS_LIMIT = envstr("PLATTER_CONTAINER_ROOTFS_LIMIT", "4G")
# No registry either: launches need an image some node already has (the lab builds them).
IMAGE_PULLS = envbool("PLATTER_IMAGE_PULLS", False)
