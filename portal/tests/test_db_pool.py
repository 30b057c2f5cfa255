"""The web server's database connections come from a pool per process (PLATTER_DB_POOL, which
deploy/gunicorn.conf.py turns on): the settings it makes, and a pool that lends the same
PostgreSQL backend again instead of opening one per request."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.db import OperationalError, connections

BASE_DIR = Path(__file__).resolve().parents[2]
SHOW = (
    "from django.conf import settings; d = settings.DATABASES['default']; "
    "print(d.get('OPTIONS', {}).get('pool'), d['CONN_MAX_AGE'])"
)


def shown(**env: str) -> str:
    clean = {k: v for k, v in os.environ.items() if k not in {"PLATTER_DB_POOL"}}
    result = subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", SHOW],
        cwd=BASE_DIR,
        env={**clean, "DJANGO_SETTINGS_MODULE": "portal.settings.test", **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return result.stdout.strip().splitlines()[-1]  # after the shell's own notice, if any


def test_a_pool_size_turns_the_pool_on_and_persistent_connections_off():
    assert shown(PLATTER_DB_POOL="7", DATABASE_CONN_MAX_AGE="60") == (
        "{'min_size': 2, 'max_size': 7, 'timeout': 10} 0"
    )
    assert shown(PLATTER_DB_POOL="1", PLATTER_DB_POOL_TIMEOUT="3").startswith(
        "{'min_size': 1, 'max_size': 1, 'timeout': 3}"
    )
    # Off unless asked: the workers and commands keep their persistent connections.
    assert shown(DATABASE_CONN_MAX_AGE="60") == "None 60"


def test_the_web_servers_config_turns_it_on():
    probe = (
        "import os, runpy; os.environ.pop('PLATTER_DB_POOL', None); "
        "runpy.run_path('deploy/gunicorn.conf.py'); "
        "print(os.environ['PLATTER_DB_POOL'], os.environ['DATABASE_CONN_MAX_AGE'])"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=BASE_DIR, capture_output=True, text=True, check=True
    )
    size, max_age = done.stdout.split()
    assert int(size) > 0 and max_age == "0"


@pytest.fixture
def pooled(db):
    """A connection to the test database with a pool of 2 (its own alias, so its own pool)."""
    default = connections["default"]
    wrapper = type(default)(
        {
            **default.settings_dict,
            "CONN_MAX_AGE": 0,
            "OPTIONS": {"pool": {"min_size": 1, "max_size": 2, "timeout": 1}},
        },
        alias="pool-test",
    )
    yield wrapper
    wrapper.close()
    wrapper.close_pool()


def backend_of(wrapper) -> int:
    with wrapper.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        return cursor.fetchone()[0]


def test_requests_borrow_connections_and_give_them_back(pooled):
    backends = set()
    for _ in range(6):  # six requests, one after the other
        backends.add(backend_of(pooled))
        pooled.close()  # as at a request's end: back to the pool
        assert pooled.connection is None
    assert len(backends) <= 2  # the pool's backends, lent again (not six new ones)
    assert pooled.pool.get_stats()["pool_available"] >= 1


def test_no_more_than_the_pool_are_lent_at_once(pooled):
    pooled.pool.open()  # Django opens it at the first connection
    held = [pooled.pool.getconn() for _ in range(2)]
    try:
        with pytest.raises(OperationalError):
            pooled.ensure_connection()  # waits the pool's timeout, then fails
    finally:
        for connection in held:
            pooled.pool.putconn(connection)
