"""Celery tasks: thin wrappers that take ids and call services."""

from celery import shared_task


@shared_task(name="platter.ping")
def ping() -> str:
    """Round trip through the broker and a worker; used by health checks and tests."""
    return "pong"
