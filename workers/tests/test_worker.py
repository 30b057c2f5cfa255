"""A real Celery worker process takes tasks from the real Redis broker."""

import pytest

from workers.tasks import ping


@pytest.mark.django_db(transaction=True)
def test_a_task_round_trips_through_redis_and_a_worker_process(celery_worker_process):
    result = ping.delay()
    assert result.get(timeout=30) == "pong"
    assert celery_worker_process.poll() is None, "the worker process died"
