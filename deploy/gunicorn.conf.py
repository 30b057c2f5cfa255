"""gunicorn settings for the portal's web process: `gunicorn -c deploy/gunicorn.conf.py`.

The web process only answers requests: Docker work goes to the Celery workers. Its workers are
uvicorn's (ASGI): streams (log follows, proxied web UIs) wait on the event loop instead of each
holding a thread, and Django runs the synchronous views and middleware in threads of its own,
one per request in progress (issue 29). Every value can be overridden from the environment
(GUNICORN_*), e.g. by the systemd unit or compose.
"""

import multiprocessing
import os

# Production settings unless the environment says otherwise (e.g. a staging settings module).
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings.prod")
# Under ASGI every request runs its synchronous code in a thread of its own, so a connection
# kept for the next request would be kept by a thread that is gone: each worker keeps a pool of
# connections instead (psycopg's, PLATTER_DB_POOL at most; portal/settings/base.py), which a
# request borrows at its first query and gives back when it ends. Opening one per request cost
# every request a PostgreSQL backend (bench/api). PLATTER_DB_POOL=0: a connection per request.
os.environ.setdefault("PLATTER_DB_POOL", "10")
os.environ.setdefault("DATABASE_CONN_MAX_AGE", "0")

wsgi_app = "portal.asgi:application"  # gunicorn's name for the app, an ASGI one here
# Behind a reverse proxy on the same host (systemd) or the compose network (compose sets
# 0.0.0.0:8000): never exposed directly, the proxy terminates TLS and serves /static/.
bind = os.environ.get("GUNICORN_BIND", "127.0.0.1:8000")
workers = int(os.environ.get("GUNICORN_WORKERS", min(2 * multiprocessing.cpu_count() + 1, 9)))
worker_class = "uvicorn_worker.UvicornWorker"
# A worker whose event loop stops answering gunicorn's heartbeat this long is killed and
# logged; streams do not count (they wait on the loop), each has its own deadline (settings).
timeout = int(os.environ.get("GUNICORN_TIMEOUT", "30"))
graceful_timeout = 20
keepalive = 5
# Recycle workers now and then, so a slow leak never grows without bound. A new worker costs
# about 2 s of CPU (Python, Django and the apps imported again): every 2,000 requests that was
# 1 ms of every request at the API's rate (bench/api), every 20,000 it is 0.1 ms.
max_requests = 20000
max_requests_jitter = 2000
# The proxy sets X-Forwarded-Proto; only trust it from where the proxy runs.
forwarded_allow_ips = os.environ.get("GUNICORN_FORWARDED_ALLOW_IPS", "127.0.0.1")
accesslog = "-"
errorlog = "-"
# Headers a request may send, bounded (defaults kept explicit for review).
limit_request_line = 4094
limit_request_fields = 100
