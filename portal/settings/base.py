"""Settings shared by every environment; dev.py, test.py and prod.py adjust them."""

from pathlib import Path
from typing import Any

import dj_database_url

from portal.env import envbool, envint, envlist, envstr

BASE_DIR = Path(__file__).resolve().parent.parent.parent
# Private state of this checkout: database cluster, Redis, the lab's certificates and disks.
STATE_DIR = Path(envstr("PLATTER_STATE_DIR", str(BASE_DIR / ".local")))

# The project's own Postgres and Redis listen on these loopback ports unless URLs are given.
LOCAL_POSTGRES_PORT = envint("PLATTER_POSTGRES_PORT", 55432)
LOCAL_REDIS_PORT = envint("PLATTER_REDIS_PORT", 56379)

SECRET_KEY = envstr("SECRET_KEY", "")
DEBUG = envbool("DEBUG", False)
ALLOWED_HOSTS = envlist("ALLOWED_HOSTS", [])
CSRF_TRUSTED_ORIGINS = envlist("CSRF_TRUSTED_ORIGINS", [])
# Reverse proxies in front of the portal: the client address (logs, audit, sign-in lock-out)
# is the entry the outermost of them appended to X-Forwarded-For; 0 = use REMOTE_ADDR.
TRUSTED_PROXY_HOPS = envint("PLATTER_TRUSTED_PROXY_HOPS", 0)

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "django_htmx",
    "apps.accounts",
    "apps.inventory",
    "apps.catalog",
    "apps.clusters",
    "apps.usage",  # core-, memory- and disk-hours read from the clusters' life (issue 33)
    "apps.health",
    # The REST API (apps.api, REST_FRAMEWORK below) and personal tokens (apps.tokens).
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",  # Swagger UI / Redoc files served from the package, no CDN
    "apps.tokens",
    "apps.api",
    "apps.web",  # the web self-service: server-rendered pages, htmx from django-htmx
    "apps.audit",  # who launched, stopped, destroyed, ... and from where; admin only
    "axes",  # sign-in lock-out (AXES_* below)
    "apps.metrics",  # the recorder of histograms and counters; /metrics is apps/exporter
    "apps.proxy",  # the products' web UIs (UI_DOMAIN below)
    "apps.jobs",  # Spark and MapReduce jobs on running clusters (JOB_* below)
]

MIDDLEWARE = [
    "portal.context.RequestContextMiddleware",
    "portal.limits.RequestLimitsMiddleware",  # NUL bytes, body size (before anything reads)
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    # A web UI host (c<N>.<UI_DOMAIN>) is answered here and serves nothing else.
    "apps.proxy.middleware.UIHostMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "csp.middleware.CSPMiddleware",  # CONTENT_SECURITY_POLICY below
    "axes.middleware.AxesMiddleware",  # last: turns a sign-in lock-out into the 429 page
]

ROOT_URLCONF = "portal.urls"
WSGI_APPLICATION = "portal.wsgi.application"
ASGI_APPLICATION = "portal.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

DATABASES = {
    "default": dj_database_url.parse(
        envstr("DATABASE_URL", f"postgres://platter@127.0.0.1:{LOCAL_POSTGRES_PORT}/platter"),
        conn_max_age=envint("DATABASE_CONN_MAX_AGE", 60),
        conn_health_checks=True,
    )
}
# A pool of up to PLATTER_DB_POOL connections per process (psycopg's pool, Django's
# OPTIONS["pool"]); 0: none. The web server turns it on (deploy/gunicorn.conf.py): under ASGI
# every request runs in a thread of its own, so a connection kept by a thread (CONN_MAX_AGE) is
# lost with it, and opening one per request cost each request a PostgreSQL backend (bench/api).
# A request takes a connection at its first query and gives it back when it ends; a stream
# gives it back before its body (portal.asgi). Off, connections follow DATABASE_CONN_MAX_AGE
# (the Celery workers and commands keep theirs 60 s).
DATABASE_POOL = envint("PLATTER_DB_POOL", 0)
if DATABASE_POOL:
    DATABASES["default"]["CONN_MAX_AGE"] = 0  # Django refuses a pool with persistent ones
    DATABASES["default"].setdefault("OPTIONS", {})["pool"] = {
        "min_size": min(2, DATABASE_POOL),
        "max_size": DATABASE_POOL,
        # A request waits this long for a free connection, then fails (500, logged).
        "timeout": envint("PLATTER_DB_POOL_TIMEOUT", 10),
    }
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

REDIS_URL = envstr("REDIS_URL", f"redis://127.0.0.1:{LOCAL_REDIS_PORT}/0")
# A Redis host that never answers must not hold a request: connect and read time out.
REDIS_TIMEOUTS = {"socket_connect_timeout": 3, "socket_timeout": 5}
CACHES = {
    "default": {
        # Django's Redis cache, with one client per process instead of one per call and thread.
        "BACKEND": "portal.cache.SharedRedisCache",
        "LOCATION": REDIS_URL,
        "OPTIONS": REDIS_TIMEOUTS,
    }
}

# The largest request body (bytes) any page or API call accepts (413 above it; portal.limits).
DATA_UPLOAD_MAX_MEMORY_SIZE = envint("PLATTER_MAX_REQUEST_BYTES", 1024 * 1024)

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "/"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = Path(envstr("STATIC_ROOT", str(BASE_DIR / "staticfiles")))

REST_FRAMEWORK: dict[str, Any] = {
    "DEFAULT_AUTHENTICATION_CLASSES": ["rest_framework.authentication.SessionAuthentication"],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
}

# Celery: JSON only, tasks take ids; a task is acknowledged after it ran so a killed worker's
# task is delivered again (tasks are written to be idempotent).
CELERY_BROKER_URL = REDIS_URL
CELERY_RESULT_BACKEND = REDIS_URL
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# No task may run longer than TASK_TIME_LIMIT (a disk benchmark of a big node is the longest),
# and Redis delivers an unacknowledged task again only after the visibility timeout: longer
# than any task, so a slow task is never run twice at once. A task lost with a killed worker is
# redelivered after it; cluster operations are picked up sooner by resume_stalled.
CELERY_TASK_TIME_LIMIT = envint("PLATTER_TASK_TIME_LIMIT", 3 * 3600)
CELERY_BROKER_TRANSPORT_OPTIONS = {
    "visibility_timeout": CELERY_TASK_TIME_LIMIT + 3600,
    "socket_connect_timeout": REDIS_TIMEOUTS["socket_connect_timeout"],
}
CELERY_REDIS_SOCKET_CONNECT_TIMEOUT = REDIS_TIMEOUTS["socket_connect_timeout"]
CELERY_BEAT_SCHEDULE: dict[str, dict[str, Any]] = {
    "expire-leases": {"task": "platter.expire_leases", "schedule": 60.0},
    "admit-queued": {"task": "platter.admit_queued", "schedule": 30.0},
}

CELERY_BEAT_SCHEDULE["reconcile"] = {"task": "platter.reconcile", "schedule": 30.0}
CELERY_BEAT_SCHEDULE["resume-stalled"] = {"task": "platter.resume_stalled", "schedule": 60.0}
CELERY_BEAT_SCHEDULE["warn-budgets"] = {"task": "platter.warn_budgets", "schedule": 300.0}
CELERY_BEAT_SCHEDULE["stop-idle"] = {"task": "platter.stop_idle", "schedule": 60.0}
# Autoscaling (apps/clusters/autoscale.py): each cluster with a policy is read this often; a
# policy's cooldown is never shorter than the minimum; one reading gets this long at most.
AUTOSCALE_SAMPLE_SECONDS = envint("PLATTER_AUTOSCALE_SAMPLE_SECONDS", 15)
AUTOSCALE_MIN_COOLDOWN_SECONDS = envint("PLATTER_AUTOSCALE_MIN_COOLDOWN_SECONDS", 120)
AUTOSCALE_READ_SECONDS = envint("PLATTER_AUTOSCALE_READ_SECONDS", 30)
CELERY_BEAT_SCHEDULE["autoscale"] = {
    "task": "platter.autoscale",
    "schedule": float(AUTOSCALE_SAMPLE_SECONDS),
}
# The idle pass probes clusters in parallel (IDLE_PROBE_THREADS at once); a cluster whose probes
# take longer than IDLE_PROBE_BUDGET_SECONDS counts as seen unused this pass, and the pass goes on.
IDLE_PROBE_BUDGET_SECONDS = envint("PLATTER_IDLE_PROBE_BUDGET_SECONDS", 30)
IDLE_PROBE_THREADS = envint("PLATTER_IDLE_PROBE_THREADS", 16)
# Idle stop (apps/clusters/idle.py): the owner is warned this long before (at most a fifth of
# the cluster's limit).
IDLE_WARN_MINUTES = envint("PLATTER_IDLE_WARN_MINUTES", 10)
# A cluster in a working state (placing, configuring, stopping, destroying) this long with no
# worker on it lost its task: beat hands it to the workers again.
STALL_SECONDS = envint("PLATTER_STALL_SECONDS", 600)
# Cluster work (launch, stop, start, destroy) goes to the workers once the request commits.
# Tests turn it off unless they run a worker, so no test leaves work in the queue.
DISPATCH_CLUSTER_TASKS = envbool("PLATTER_DISPATCH_CLUSTER_TASKS", True)

# Docker Engine API calls to nodes never wait longer than this (seconds).
NODE_API_TIMEOUT = envint("PLATTER_NODE_API_TIMEOUT", 30)
# Engine API version spoken to nodes: 1.41 is Docker 20.10 (Debian 12's docker.io); newer
# engines still serve it, and pinning it saves a version round trip per new client.
NODE_API_VERSION = envstr("PLATTER_NODE_API_VERSION", "1.41")
# Tries per Engine API call when the node does not answer or has a server error.
NODE_API_RETRIES = envint("PLATTER_NODE_API_RETRIES", 3)
# This portal's name on the nodes: container names, labels and data folders carry it, so two
# portals (or test runs) sharing a node never touch each other's containers or data.
PLATTER_SITE = envstr("PLATTER_SITE", "platter")
# The cluster network's name on every node (macvlan, created on first use).
NODE_NETWORK_NAME = envstr("PLATTER_NODE_NETWORK_NAME", "platter")
# A small image with a POSIX shell for helper containers (disk discovery, wipes).
NODE_HELPER_IMAGE = envstr("PLATTER_NODE_HELPER_IMAGE", "busybox:1.36")
# The perimeter (apps/clusters/perimeter.py): each node's firewall lets a cluster's ports
# answer only its members, the portal and the sources its owner allows (SSH always).
# PERIMETER_PORTAL_SOURCES: the addresses (CIDRs) the portal's web and worker hosts reach the
# clusters from; PERIMETER_SITE_SOURCES: a bastion or VPN range every cluster lets in.
PERIMETER = envbool("PLATTER_PERIMETER", True)
PERIMETER_PORTAL_SOURCES = envlist("PLATTER_PERIMETER_PORTAL_SOURCES", [])
PERIMETER_SITE_SOURCES = envlist("PLATTER_PERIMETER_SITE_SOURCES", [])
# An owner's allow-list holds at most this many sources.
PERIMETER_MAX_SOURCES = envint("PLATTER_PERIMETER_MAX_SOURCES", 32)
# The reconciler applies each node's rules again after this long (a node rebooted, or rules
# flushed by hand, gets them back), and always before it restarts a container.
PERIMETER_REFRESH_SECONDS = envint("PLATTER_PERIMETER_REFRESH_SECONDS", 120)
# The helper image that sets the rules (nft, run with NET_ADMIN in the node's network
# namespace): deploy/images/node-firewall.
NODE_FIREWALL_IMAGE = envstr("PLATTER_NODE_FIREWALL_IMAGE", "platter/node-firewall:1")
# Platter's product images (platter/<product>:<tag>, deploy/images/) come from this registry
# (e.g. registry.example.org); empty: the nodes hold them already (the lab builds them).
IMAGE_REGISTRY = envstr("PLATTER_IMAGE_REGISTRY", "")
# Whether nodes may pull an image they lack. Without pulls the catalog refuses a launch whose
# image is on no active node (409) instead of queueing a cluster that cannot start.
IMAGE_PULLS = envbool("PLATTER_IMAGE_PULLS", True)
# Limits of every instance's container besides its cores and memory.
CONTAINER_PIDS_LIMIT = envint("PLATTER_CONTAINER_PIDS_LIMIT", 4096)
# Size limit of a container's writable layer (e.g. "10G"), so one user cannot fill a node's
# Docker disk; empty: none. Docker enforces it only on overlay2 over XFS mounted with pquota.
CONTAINER_ROOTFS_LIMIT = envstr("PLATTER_CONTAINER_ROOTFS_LIMIT", "")
# An instance whose process crashes (exits non-zero; not a user's stop) is restarted by its
# node's Docker, with the same disks, up to this many times; one that stays stopped (Docker
# gave up, or someone stopped it behind the portal's back) is started again by the
# reconciler up to this many times more, then its cluster fails naming it and its last lines.
CONTAINER_RESTARTS = envint("PLATTER_CONTAINER_RESTARTS", 3)
# Seconds a container gets to stop before it is killed.
CONTAINER_STOP_TIMEOUT = envint("PLATTER_CONTAINER_STOP_TIMEOUT", 10)
# How long stop/start/destroy wait for another worker to finish with a cluster.
CLUSTER_LOCK_WAIT = envint("PLATTER_CLUSTER_LOCK_WAIT", 60)
# A resize's drain (HDFS decommission, Spark executors ending) ends failed after this long,
# the workers back in service (under the clusters queue's task time limit); polled this often.
RESIZE_DRAIN_SECONDS = envint("PLATTER_RESIZE_DRAIN_SECONDS", 900)
RESIZE_POLL_SECONDS = envint("PLATTER_RESIZE_POLL_SECONDS", 5)
# Retries (5 s apart) of a stop or start whose nodes do not answer, before the cluster fails.
CLUSTER_TASK_RETRIES = envint("PLATTER_CLUSTER_TASK_RETRIES", 3)
# Retries (and seconds between them) of a destroy whose nodes do not answer.
DESTROY_RETRIES = envint("PLATTER_DESTROY_RETRIES", 10)
DESTROY_RETRY_SECONDS = envint("PLATTER_DESTROY_RETRY_SECONDS", 30)
# How many times a launch re-places a cluster after a node failed under it.
SCHEDULER_PLACE_ATTEMPTS = envint("PLATTER_SCHEDULER_PLACE_ATTEMPTS", 3)
# The reconciler: a node is marked down after this many failed checks in a row; containers
# with our labels that no instance owns are removed once they are this many seconds old.
NODE_DOWN_AFTER_FAILED_CHECKS = envint("PLATTER_NODE_DOWN_AFTER_FAILED_CHECKS", 3)
ORPHAN_GRACE_SECONDS = envint("PLATTER_ORPHAN_GRACE_SECONDS", 300)

# Disk benchmarks (fio, apps/inventory/benchmarks.py): the image that has fio on its PATH, the
# file sizes of Table 4 of the CESGA paper (1 GiB sequential, 256 MiB random) divided by
# BENCH_SIZE_DIVISOR, seconds per fio job, and the I/O engine (psync if libaio is missing).
BENCH_IMAGE = envstr("PLATTER_BENCH_IMAGE", "ljishen/fio:latest")
BENCH_SIZE_DIVISOR = envint("PLATTER_BENCH_SIZE_DIVISOR", 1)
BENCH_RUNTIME_S = envint("PLATTER_BENCH_RUNTIME_S", 10)
BENCH_IOENGINE = envstr("PLATTER_BENCH_IOENGINE", "libaio")
# `bench_disks --set-kind`: random 4 KiB reads at queue depth 1 above this many IOPS mean SSD
# (a spindle does 100-300).
BENCH_SSD_MIN_IOPS = envint("PLATTER_BENCH_SSD_MIN_IOPS", 1000)
# A disk is flagged slow when a result is below this percentage of the median of the disks of
# the same kind on its node ("node") or in the whole pool ("pool").
DISK_SLOW_PERCENT = envint("PLATTER_DISK_SLOW_PERCENT", 50)
DISK_SLOW_SCOPE = envstr("PLATTER_DISK_SLOW_SCOPE", "node")

# Logs: one handler on the root logger (stderr), so Django's request logging, Celery's worker
# logs (CELERY_WORKER_HIJACK_ROOT_LOGGER below) and ours all go the same way. Every line
# carries the request id and cluster id bound in portal.context (portal/logs.py). "plain" for
# people (development), "json" for log collectors (production's default, prod.py).
LOG_FORMAT = envstr("PLATTER_LOG_FORMAT", "plain")
LOGGING: dict[str, Any] = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {"context": {"()": "portal.logs.ContextFilter"}},
    "formatters": {
        "plain": {
            "()": "portal.logs.PlainFormatter",
            "format": "%(asctime)s %(levelname)s %(name)s %(message)s",
        },
        "json": {"()": "portal.logs.JsonFormatter"},
    },
    "handlers": {
        "console": {
            "class": "logging.StreamHandler",
            "formatter": LOG_FORMAT,
            "filters": ["context"],
        }
    },
    "root": {"handlers": ["console"], "level": envstr("LOG_LEVEL", "INFO")},
    # Django's own handlers (console when DEBUG, mail to admins, runserver's) would print
    # some lines twice or in another format: its loggers hand everything to the root.
    "loggers": {
        "django": {"handlers": [], "level": "INFO", "propagate": True},
        "django.server": {"handlers": [], "level": "INFO", "propagate": True},
    },
}
CELERY_WORKER_HIJACK_ROOT_LOGGER = False

# Scheduler
# Instances of one cluster go on distinct nodes when the inventory allows it (failure domains).
SCHEDULER_SPREAD = envbool("PLATTER_SCHEDULER_SPREAD", True)
# Placement scores only the first N nodes that fit instead of all of them (like Kubernetes'
# percentageOfNodesToScore): keeps a reservation's cost flat on inventories of 10,000 nodes.
SCHEDULER_CANDIDATE_WINDOW = envint("PLATTER_SCHEDULER_CANDIDATE_WINDOW", 16)
# Times a reservation is re-planned when a concurrent one took the chosen capacity first.
SCHEDULER_RESERVE_ATTEMPTS = envint("PLATTER_SCHEDULER_RESERVE_ATTEMPTS", 5)
# Admission queue order: "fifo" (oldest first) or "sjf" (shortest declared lease first).
SCHEDULER_QUEUE_ORDER = envstr("PLATTER_SCHEDULER_QUEUE_ORDER", "fifo")
# Strict order stops at the first queued cluster that does not fit (the head). Backfill
# (conservative, EASY) lets a later cluster go now only if it fits now and its lease ends by the
# head's shadow time: when the head fits if the clusters holding resources end with their
# leases. Clusters without a lease end never go ahead of a waiting head, and nothing does while
# the head waits on such a cluster (apps/clusters/backfill.py).
SCHEDULER_QUEUE_BACKFILL = envbool("PLATTER_SCHEDULER_QUEUE_BACKFILL", False)
# Retry queued clusters as soon as a release commits (off: a periodic task does it).
SCHEDULER_ADMIT_ON_RELEASE = envbool("PLATTER_SCHEDULER_ADMIT_ON_RELEASE", True)
# Network instances take their addresses from (by name); empty = the first network.
SCHEDULER_NETWORK = envstr("PLATTER_SCHEDULER_NETWORK", "")
# Limits for users with no Quota row of their own (None = unlimited).
SCHEDULER_DEFAULT_QUOTA = {
    "max_clusters": envint("PLATTER_QUOTA_CLUSTERS", 5),
    "max_instances": envint("PLATTER_QUOTA_INSTANCES", 32),
    "max_cores": envint("PLATTER_QUOTA_CORES", 128),
    "max_memory_mb": envint("PLATTER_QUOTA_MEMORY_MB", 512 * 1024),
    "max_disks": envint("PLATTER_QUOTA_DISKS", 128),
}
# Longest lease a user may ask or extend to, in hours (0 = no cap).
SCHEDULER_MAX_LEASE_HOURS = envint("PLATTER_SCHEDULER_MAX_LEASE_HOURS", 24 * 30)

# REST API (apps.api) and personal tokens (apps.tokens)
REST_FRAMEWORK = {
    **REST_FRAMEWORK,
    # Bearer first: its WWW-Authenticate header makes missing credentials a 401, not a 403.
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "apps.tokens.authentication.BearerTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    # A read-only token's scope: apps.tokens.authentication, whatever a view's permissions.
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    # One class, every budget below in one trip to Redis (apps/api/throttling.py).
    "DEFAULT_THROTTLE_CLASSES": ["apps.api.throttling.ApiThrottle"],
    "DEFAULT_THROTTLE_RATES": {
        "anon": envstr("PLATTER_API_RATE_ANON", "60/min"),
        "user": envstr("PLATTER_API_RATE_USER", "600/min"),
        "token": envstr("PLATTER_API_RATE_TOKEN", "300/min"),
    },
    "DEFAULT_PARSER_CLASSES": [
        "apps.api.parsers.JSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    "DEFAULT_PAGINATION_CLASS": "apps.api.pagination.Pagination",
    "PAGE_SIZE": 50,
    "DEFAULT_FILTER_BACKENDS": ["django_filters.rest_framework.DjangoFilterBackend"],
    "DEFAULT_SCHEMA_CLASS": "apps.api.schema.PlatterAutoSchema",
    "EXCEPTION_HANDLER": "apps.api.errors.exception_handler",
    "DEFAULT_RENDERER_CLASSES": [
        "rest_framework.renderers.JSONRenderer",
        "rest_framework.renderers.BrowsableAPIRenderer",
    ],
}
# A launch's Idempotency-Key (apps.api.idempotency) is remembered this many hours.
IDEMPOTENCY_KEY_HOURS = envint("PLATTER_IDEMPOTENCY_KEY_HOURS", 24)
# A token found valid is kept this many seconds in each web process (apps/tokens/cache.py), so
# most calls skip its query. Its expiry still holds to the second; revoking it, or changing its
# user, takes effect at once in the process that did it and within this long in the others.
# 0: every call reads the token.
TOKEN_CACHE_SECONDS = envint("PLATTER_TOKEN_CACHE_SECONDS", 5)
SPECTACULAR_SETTINGS = {
    "TITLE": "Platter API",
    "DESCRIPTION": "Big Data clusters as Docker containers with dedicated local disks.",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "SCHEMA_PATH_PREFIX": "/api/v1",
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
    "ENUM_NAME_OVERRIDES": {
        "ClusterStateEnum": "apps.clusters.models.Cluster.State",
        "InstanceStateEnum": "apps.clusters.models.Instance.State",
        "NodeStateEnum": "apps.inventory.models.Node.State",
        "DiskStateEnum": "apps.inventory.models.Disk.State",
        "JobStateEnum": "apps.jobs.models.Job.State",
        "JobKindEnum": "apps.jobs.models.Job.Kind",
    },
}

# ---------------------------------------------------------------- security (issue 8, part A)
# Content-Security-Policy in every environment, so dev and the browser tests see what
# production serves: scripts and styles only from our own static files (htmx included), no
# inline code, no framing, forms post only to us. The API docs pages relax it for themselves
# (apps/api/urls.py).
from datetime import timedelta  # noqa: E402

from csp.constants import NONE, SELF  # noqa: E402

CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [SELF],
        "script-src": [SELF],
        "style-src": [SELF],
        "img-src": [SELF, "data:"],  # the admin's and the API browser's icons are data: URLs
        "object-src": [NONE],
        "base-uri": [SELF],
        "form-action": [SELF],
        "frame-ancestors": [NONE],
    }
}

# Sign-in lock-out (django-axes): after AXES_FAILURE_LIMIT failures for one (username, client
# address) pair, that pair is refused (429) for the cool-off, on /accounts/login/ and on the
# admin's login alike; another user from the same address, or the same user from elsewhere,
# is not. The address is the one logs and the audit log record (portal.context.address_of).
# Staff see and reset lock-outs in the admin (Axes > Access attempts).
AUTHENTICATION_BACKENDS = [
    "portal.signin.LockoutBackend",
    "django.contrib.auth.backends.ModelBackend",
]
AXES_FAILURE_LIMIT = envint("PLATTER_SIGNIN_FAILURE_LIMIT", 5)
AXES_COOLOFF_TIME = timedelta(minutes=envint("PLATTER_SIGNIN_COOLOFF_MINUTES", 15))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_CLIENT_IP_CALLABLE = "portal.context.address_of"
AXES_LOCKOUT_CALLABLE = "portal.signin.lockout_response"  # 429 page with Retry-After
AXES_RESET_ON_SUCCESS = True
# A failure while locked out does not start the cool-off again: a locked user knows when to
# come back, and an attacker gains nothing by trying (the pair stays refused meanwhile).
AXES_RESET_COOL_OFF_ON_FAILURE_DURING_LOCKOUT = False
# Its start-up banner would open every manage.py command and worker log.
AXES_VERBOSE = False

# Sessions: a sign-in lasts a working day, and the session cookie is never readable by
# scripts. prod.py adds Secure to every cookie.
SESSION_COOKIE_AGE = envint("PLATTER_SESSION_HOURS", 12) * 3600
SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SAMESITE = "Lax"
CSRF_COOKIE_SAMESITE = "Lax"
# No script reads the CSRF token from its cookie: pages carry it (<body hx-headers>, forms,
# DRF's browsable API), so a script that runs on the portal's origin cannot read it either.
CSRF_COOKIE_HTTPONLY = True
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"

# ---------------------------------------------------------------- nodes and queues (issue 8, D)
# The portal's CA and client certificate for nodes (manage.py node_certs): private keys live
# in these files (0600, folder 0700), never in the database.
PKI_DIR = Path(envstr("PLATTER_PKI_DIR", str(STATE_DIR / "pki")))
# A helper container (disk discovery, wipe, fio benchmark) may run this long (seconds) before
# the worker stops waiting for it.
NODE_HELPER_TIMEOUT = envint("PLATTER_NODE_HELPER_TIMEOUT", 1800)
# Queues by kind of work (portal/queues.py says why): a slow node or a long benchmark only
# delays work of its own kind. Hard time limits are the last resort against a call that hangs
# (image pulls have no timeout in the Docker SDK); they need the prefork pool, the default of
# `celery worker`. A killed cluster task leaves its cluster to beat's resume_stalled.
from kombu import Exchange, Queue  # noqa: E402

from portal.queues import ALL_QUEUES, DEFAULT, TASK_QUEUES  # noqa: E402

CELERY_TASK_ROUTES = {name: {"queue": queue} for name, queue in TASK_QUEUES.items()}
CELERY_TASK_DEFAULT_QUEUE = DEFAULT
# Declared up front, so `celery purge` and app.control.purge() empty every queue; each with an
# exchange and routing key of its own (a bare Queue(name) would bind every queue to the default
# queue's exchange and key, so anything published there by key would reach all of them).
CELERY_TASK_QUEUES = [Queue(name, Exchange(name), routing_key=name) for name in ALL_QUEUES]
_TIME_LIMITS = {
    "clusters": envint("PLATTER_CLUSTER_TASK_TIME_LIMIT", 1800),
    "nodes": envint("PLATTER_NODE_TASK_TIME_LIMIT", 4 * 3600),
    "periodic": envint("PLATTER_PERIODIC_TASK_TIME_LIMIT", 300),
    "ssh_keys": envint("PLATTER_SSH_KEYS_TASK_TIME_LIMIT", 1800),
    # A job's worker kills it at JOB_MAX_SECONDS (24 h by default) and ends it; this is later.
    "jobs": envint("PLATTER_JOB_TASK_TIME_LIMIT", 24 * 3600 + 600),
    # A pass probes clusters at once, each within IDLE_PROBE_BUDGET_SECONDS (below).
    "idle": envint("PLATTER_IDLE_TASK_TIME_LIMIT", 300),
}
CELERY_TASK_ANNOTATIONS = {
    name: {"time_limit": _TIME_LIMITS[queue]} for name, queue in TASK_QUEUES.items()
}
# A beat message nobody took before the next one is due is dropped, so workers that were
# away do not come back to a pile of identical passes.
for _entry in CELERY_BEAT_SCHEDULE.values():
    _entry.setdefault("options", {})["expires"] = _entry["schedule"]

# ---------------------------------------------------------------- metrics (issue 8, part C)
# /metrics (apps/exporter) in Prometheus' format for staff, or for a scraper that sends
# "Authorization: Bearer <PLATTER_METRICS_TOKEN>" (or _FILE); empty = no token access.
METRICS_TOKEN = envstr("PLATTER_METRICS_TOKEN", "")

# ---------------------------------------------------------------- web UIs (issue 17, item 5)
# apps.proxy serves the products' web UIs (Spark, NameNode, ResourceManager) to a cluster's
# owner and staff. They run the tenant's own scripts (a user is root in their containers), so
# cluster N's UIs live on an origin of their own, cN.<PLATTER_UI_DOMAIN> (a wildcard DNS name
# and certificate; README, "Production deployment"): the portal's path
# /clusters/N/ui/<hostname>/<port>/ checks access and sends the browser there with a one-time
# ticket; that host gets a cookie of its own for that user and cluster, and serves nothing else
# (apps.proxy.middleware.UIHostMiddleware, in MIDDLEWARE above).
# The UI hosts' parent domain, e.g. "ui.platter.example.org"; dev.py and the tests use
# "ui.localhost". ALLOWED_HOSTS takes ".<UI_DOMAIN>" in dev.py and prod.py. Empty: no UI
# origins (see PROXY_ON_PORTAL_ORIGIN).
UI_DOMAIN = envstr("PLATTER_UI_DOMAIN", "").strip(".").lower()
# Serve UIs on the portal's own origin when there is no UI_DOMAIN, sandboxed (CSP sandbox
# without allow-same-origin: scripts in an opaque origin, no writes through the proxy; pages
# that fetch data with scripts, such as Spark's executors tab, stay empty). Off: no UIs then.
PROXY_ON_PORTAL_ORIGIN = envbool("PLATTER_PROXY_ON_PORTAL_ORIGIN", False)
# A ticket is good for this many seconds and once; a UI host's cookie for this many seconds
# (then the next page view fetches a new one from the portal, which checks the session again).
UI_TICKET_SECONDS = envint("PLATTER_UI_TICKET_SECONDS", 30)
UI_COOKIE_SECONDS = envint("PLATTER_UI_COOKIE_SECONDS", 900)
UI_COOKIE_NAME = "platter_ui"
# The portal's URL, where a UI host sends a browser that has no cookie yet (one whose cookie
# ran out goes back to the portal that minted it); empty: such a browser is told to start
# from the cluster page.
PORTAL_URL = envstr("PLATTER_PORTAL_URL", "").rstrip("/")
# Seconds to wait for a node's UI to accept the connection, and then for each read.
PROXY_CONNECT_TIMEOUT = envint("PLATTER_PROXY_CONNECT_TIMEOUT", 5)
PROXY_READ_TIMEOUT = envint("PLATTER_PROXY_READ_TIMEOUT", 60)
# WebSockets to a UI (Jupyter's kernels; apps/proxy/websocket.py): a message is at most this
# many bytes either way (a notebook's plot is a few), and a connection that carries no message
# either way for this many seconds is closed (JupyterLab opens it again when it needs it).
PROXY_WS_MAX_MESSAGE_BYTES = envint("PLATTER_PROXY_WS_MAX_MESSAGE_BYTES", 16 * 1024 * 1024)
PROXY_WS_IDLE_SECONDS = envint("PLATTER_PROXY_WS_IDLE_SECONDS", 900)
# An open websocket checks this often that its user still may see the cluster (closed 4403
# when not), and is closed (1001) once it is this old, however busy.
PROXY_WS_RECHECK_SECONDS = envint("PLATTER_PROXY_WS_RECHECK_SECONDS", 30)
PROXY_WS_MAX_LIFE_SECONDS = envint("PLATTER_PROXY_WS_MAX_LIFE_SECONDS", 8 * 3600)
# httpx logs every proxied request at INFO (static files included): the request log has them.
LOGGING["loggers"]["httpx"] = {"level": "WARNING"}

# ---------------------------------------------------------------- directory sign-in (issue 20, 3)
# LDAP and OpenID Connect, each off until its PLATTER_LDAP_* / PLATTER_OIDC_* variables name a
# server (portal/settings/directory.py reads them; README: "Sign in with your directory").
# Their backends come after the local accounts' (and axes' lock-out check), so a local
# sign-in never waits for the directory and a wrong directory password counts as a failure.
from portal.settings.directory import directory_settings  # noqa: E402

_directory = directory_settings()
AUTHENTICATION_BACKENDS += _directory.pop("DIRECTORY_BACKENDS")
# Off until directory_settings() sets them: named here, typed, whichever directory is on.
LDAP_ENABLED = False
LDAP_GROUP_MAPPING: dict[str, Any] = {}
OIDC_ENABLED = False
OIDC_PROVIDER_NAME = ""
OIDC_ISSUER = ""
OIDC_USERNAME_CLAIM = ""
OIDC_GROUPS_CLAIM = ""
OIDC_GROUP_MAPPING: dict[str, Any] = {}
globals().update(_directory)

# ---------------------------------------------------------------- jobs (issue 30)
# Spark and MapReduce jobs on running clusters (apps.jobs, workers/jobs.py). Uploads are kept
# in the database: a cap per file and per job, named in the 413 that refuses more. The driver
# log keeps its last JOB_LOG_MAX_CHARS characters; a result file downloads up to
# JOB_RESULT_MAX_BYTES.
JOB_FILE_MAX_BYTES = envint("PLATTER_JOB_FILE_MAX_BYTES", 16 * 1024 * 1024)
JOB_UPLOAD_MAX_BYTES = envint("PLATTER_JOB_UPLOAD_MAX_BYTES", 64 * 1024 * 1024)
JOB_LOG_MAX_CHARS = envint("PLATTER_JOB_LOG_MAX_CHARS", 1024 * 1024)
JOB_RESULT_MAX_BYTES = envint("PLATTER_JOB_RESULT_MAX_BYTES", 16 * 1024 * 1024)
JOB_POLL_SECONDS = float(envint("PLATTER_JOB_POLL_MS", 500)) / 1000
JOB_MAX_SECONDS = envint("PLATTER_JOB_MAX_SECONDS", 24 * 3600)
# A job's follower writes a heartbeat every poll; a running job without one for this long lost
# its worker (died, restarted), and beat's adopt-jobs pass hands it to another, which goes on
# where it stopped. Above a node call's worst case (NODE_API_TIMEOUT x NODE_API_RETRIES), so
# a follower waiting on a slow node is not taken over (if it were, it stops: no line twice).
JOB_FOLLOWER_LOST_SECONDS = envint("PLATTER_JOB_FOLLOWER_LOST_SECONDS", 120)
CELERY_BEAT_SCHEDULE["adopt-jobs"] = {
    "task": "platter.adopt_jobs",
    "schedule": 30.0,
    "options": {"expires": 30.0},  # as every beat entry (set above, before this section)
}
# Fair shares of the job slots (apps/jobs/admission.py): at most JOBS_PER_USER_RUNNING of one
# user's jobs run at once, JOBS_RUNNING_MAX in all (set it to the jobs workers' slots); the
# rest wait queued, saying why, and a freed slot goes to the user running the fewest, oldest
# submission first. The end of a job admits the next; beat's admit-jobs pass is the safety net.
JOBS_PER_USER_RUNNING = envint("PLATTER_JOBS_PER_USER_RUNNING", 2)
JOBS_RUNNING_MAX = envint("PLATTER_JOBS_RUNNING_MAX", 4)
# Uploads of a user's jobs not yet ended, all together (they leave the database when a job ends).
JOB_UPLOADS_PER_USER_MAX_BYTES = envint("PLATTER_JOB_UPLOADS_PER_USER_MAX_BYTES", 256 * 1024 * 1024)
CELERY_BEAT_SCHEDULE["admit-jobs"] = {
    "task": "platter.admit_jobs",
    "schedule": 30.0,
    "options": {"expires": 30.0},
}

# ---------------------------------------------------------------- streams (issue 29, item 2)
# Log follows and proxied web UI responses stream on the web process's event loop (ASGI,
# deploy/gunicorn.conf.py), never holding a thread; portal/streams.py counts them per user in
# Redis across processes. Over STREAMS_PER_USER the answer is 429 naming the limit. Every
# stream ends by its deadline: a follow after STREAM_FOLLOW_SECONDS, a proxied response after
# PROXY_DEADLINE_SECONDS (a UI that drips a byte now and then is cut there).
STREAMS_PER_USER = envint("PLATTER_STREAMS_PER_USER", 20)
STREAM_FOLLOW_SECONDS = envint("PLATTER_STREAM_FOLLOW_SECONDS", 300)
PROXY_DEADLINE_SECONDS = envint("PLATTER_PROXY_DEADLINE_SECONDS", 60)
# A slot a stream keeps pushing on; a dead process's slots free themselves after this long.
STREAM_SLOT_TTL = 60
# Node calls made inside a web request (a job's outputs and downloads, HDFS listings, container
# logs) wait on a node: at most NODE_CALLS_PER_USER in flight per user (429 naming the limit
# over it), none holding a database connection (portal.streams.node_call). A download holds
# its slot until its body ends. Their slots outlive the longest wait (two HDFS calls).
NODE_CALLS_PER_USER = envint("PLATTER_NODE_CALLS_PER_USER", 8)
NODE_CALL_SLOT_TTL = 300
