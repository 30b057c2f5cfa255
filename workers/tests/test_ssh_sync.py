"""SSH-key changes are coalesced per user on a queue of their own (issue 29, item 3): many
changes in a row leave at most one pending run per user in the broker, a change while a run
is under way queues exactly one more, and that run waits for the running one. Real Redis and
Celery's publishing; the worker test at the end runs the task on the real worker."""

import base64
import json
import threading
import time

import pytest
from django.core.cache import cache

from apps.accounts import ssh, ssh_sync
from apps.accounts.tests.keys import ed25519_public
from portal import locks, queues
from portal.celery import app
from workers import ssh_keys, tasks

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def unattended(settings, monkeypatch, alice, bob):
    """Sync tasks go to a queue no worker consumes, so what was sent stays there to count;
    returns a function giving the user ids of the pending runs, oldest first."""
    settings.DISPATCH_CLUSTER_TASKS = True
    name = f"ssh-sync-test-{settings.PLATTER_SITE}"
    send = app.send_task
    monkeypatch.setattr(
        app, "send_task", lambda task, args=None, **options: send(task, args, queue=name)
    )
    for user in (alice, bob):
        cache.delete(ssh_sync.pending_key(user.id))
    with app.connection_for_write() as connection:
        client = connection.default_channel.client

        def pending() -> list[int]:
            bodies = [json.loads(raw) for raw in reversed(client.lrange(name, 0, -1))]
            assert all(b["headers"]["task"] == ssh.SYNC_TASK for b in bodies)
            return [json.loads(base64.b64decode(b["body"]))[0][0] for b in bodies]

        yield pending
        client.delete(name, f"_kombu.binding.{name}")


def test_many_key_changes_in_a_row_leave_one_pending_run_per_user(unattended, alice, bob):
    keys = [ssh.add_key(alice, ed25519_public(f"a{n}")) for n in range(10)]
    ssh.add_key(bob, ed25519_public("b"))
    ssh.delete_key(alice, keys[0].id)
    ssh.add_key(bob, ed25519_public("b2"))
    assert unattended() == [alice.id, bob.id]


def test_a_change_while_a_run_is_under_way_queues_exactly_one_more(unattended, alice, monkeypatch):
    ssh.add_key(alice, ed25519_public("first"))
    assert unattended() == [alice.id]
    seen = []

    def push(user_id: int) -> dict:
        # Three changes commit while this run writes the keys...
        for n in range(3):
            ssh.add_key(alice, ed25519_public(f"meanwhile{n}"))
        seen.append(unattended())
        return {"updated": [], "failed": []}

    monkeypatch.setattr(ssh_keys, "push_keys", push)
    assert ssh_keys.sync(alice.id) == {"updated": [], "failed": []}
    # ...and leave exactly one more run behind the first one, which reads all three.
    assert seen == [[alice.id, alice.id]]
    assert ssh.add_key(alice, ed25519_public("later")) and unattended() == [alice.id, alice.id]


def test_a_run_queued_while_another_runs_waits_for_it_and_keeps_collecting_changes(
    unattended, alice
):
    ssh.add_key(alice, ed25519_public("first"))
    holding, done = threading.Event(), threading.Event()

    def running_elsewhere() -> None:  # another worker's run of alice's sync
        with locks.advisory_lock(locks.SSH_KEYS, alice.id) as got:
            assert got
            holding.set()
            done.wait(30)

    other = threading.Thread(target=running_elsewhere)
    other.start()
    try:
        assert holding.wait(30)
        assert ssh_keys.sync(alice.id) is None  # the task tries again later
        ssh.add_key(alice, ed25519_public("second"))
        assert unattended() == [alice.id]  # still pending: the retry reads this change too
    finally:
        done.set()
        other.join()
    assert ssh_keys.sync(alice.id) == {"updated": [], "failed": []}


def test_a_run_that_could_not_be_sent_leaves_nothing_pending(unattended, alice, monkeypatch):
    from apps.tasks import bus

    with monkeypatch.context() as away:
        away.setattr(bus, "send", lambda task, *args: False)  # the broker is away
        assert ssh_sync.queue_sync(alice.id) is False
    ssh.add_key(alice, ed25519_public("back"))
    assert unattended() == [alice.id]


def test_the_sync_has_a_queue_of_its_own_that_every_worker_command_consumes():
    route = app.amqp.router.route({}, ssh.SYNC_TASK)["queue"].name
    assert route == queues.SSH_KEYS != queues.CLUSTERS
    command = queues.worker_command("x")
    assert queues.SSH_KEYS in command[command.index("-Q") + 1].split(",")
    assert tasks.sync_ssh_keys.name == ssh.SYNC_TASK


def test_the_worker_runs_the_sync_from_its_queue(dispatching, alice):
    cache.delete(ssh_sync.pending_key(alice.id))
    ssh.add_key(alice, ed25519_public("worker"))
    assert cache.get(ssh_sync.pending_key(alice.id)) is not None
    # Only a run that started clears the mark: the worker took it from the ssh_keys queue.
    deadline = time.monotonic() + 60
    while cache.get(ssh_sync.pending_key(alice.id)) is not None:
        assert time.monotonic() < deadline, "no worker ran the sync"
        time.sleep(0.1)
