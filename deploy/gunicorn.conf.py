"""gunicorn settings for the portal's web process: `gunicorn -c deploy/gunicorn.conf.py`.

The web process only answers requests: Docker work goes to the Celery workers, so requests are
short and a few synchronous workers with some threads each are enough. Every value can be
overridden from the environment (GUNICORN_*), e.g. by the systemd unit or compose.
"""

import multiprocessing
import os

# Production settings unless the environment says otherwise (e.g. a staging settings module).
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings.prod")

wsgi_app = "portal.wsgi:application"
# Behind a reverse proxy on the same host (systemd) or the compose network (compose sets
# 0.0.0.0:8000): never exposed directly, the proxy terminates TLS and serves /static/.
bind = os.environ.get("GUNICORN_BIND", "127.0.0.1:8000")
workers = int(os.environ.get("GUNICORN_WORKERS", min(2 * multiprocessing.cpu_count() + 1, 9)))
threads = int(os.environ.get("GUNICORN_THREADS", "4"))
worker_class = "gthread"
# No request of ours takes long; a stuck one is killed and logged instead of piling up.
timeout = int(os.environ.get("GUNICORN_TIMEOUT", "30"))
graceful_timeout = 20
keepalive = 5
# Recycle workers now and then, so a slow leak never grows without bound.
max_requests = 2000
max_requests_jitter = 200
# The proxy sets X-Forwarded-Proto; only trust it from where the proxy runs.
forwarded_allow_ips = os.environ.get("GUNICORN_FORWARDED_ALLOW_IPS", "127.0.0.1")
accesslog = "-"
errorlog = "-"
# Headers a request may send, bounded (defaults kept explicit for review).
limit_request_line = 4094
limit_request_fields = 100
