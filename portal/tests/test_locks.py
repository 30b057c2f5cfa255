"""The advisory-lock helper every lock goes through (portal/locks.py), with real PostgreSQL
sessions: one per thread, as two workers would have."""

import threading

import pytest
from django.db import connection, transaction

from portal import locks

pytestmark = pytest.mark.django_db(transaction=True)
KEY = 2**31 - 5  # nobody else's


def held_elsewhere(namespace: int, key: int, until: threading.Event) -> threading.Event:
    """Another session takes (namespace, key) and keeps it until `until` is set."""
    holding = threading.Event()

    def hold() -> None:
        try:
            with locks.advisory_lock(namespace, key) as got:
                assert got
                holding.set()
                until.wait(30)
        finally:
            connection.close()

    threading.Thread(target=hold, daemon=True).start()
    assert holding.wait(30)
    return holding


def test_it_refuses_a_lock_another_session_holds_and_gives_it_once_let_go():
    release = threading.Event()
    held_elsewhere(locks.CLUSTER, KEY, release)
    with locks.advisory_lock(locks.CLUSTER, KEY) as got:
        assert got is False
    assert locks.held(locks.CLUSTER, KEY)
    with locks.advisory_lock(locks.CLUSTER, KEY + 1) as other:  # another key is free
        assert other is True
    threading.Timer(0.5, release.set).start()
    with locks.advisory_lock(locks.CLUSTER, KEY, wait=20) as waited:
        assert waited is True
        assert locks.held(locks.CLUSTER, KEY)
    assert not locks.held(locks.CLUSTER, KEY)


def test_namespaces_keep_apart_and_held_takes_nothing():
    release = threading.Event()
    held_elsewhere(locks.BENCHMARK, KEY, release)
    try:
        assert locks.held(locks.BENCHMARK, KEY)
        assert not locks.held(locks.SSH_KEYS, KEY)
        with locks.advisory_lock(locks.SSH_KEYS, KEY) as got:
            assert got is True
    finally:
        release.set()


def test_a_transaction_lock_ends_with_its_transaction():
    with transaction.atomic():
        locks.transaction_lock(locks.JOB_ADMISSION, KEY)
        assert locks.held(locks.JOB_ADMISSION, KEY)
    assert not locks.held(locks.JOB_ADMISSION, KEY)
