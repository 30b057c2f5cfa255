"""Celery tasks: thin wrappers that take ids (or nothing) and call services."""

from celery import shared_task

from apps.clusters import admission, services


@shared_task(name="platter.ping")
def ping() -> str:
    """Round trip through the broker and a worker; used by health checks and tests."""
    return "pong"


@shared_task(name="platter.expire_leases")
def expire_leases() -> list[int]:
    """Destroy (data kept) every cluster whose lease ended; run by beat."""
    return services.expire_leases()


@shared_task(name="platter.admit_queued")
def admit_queued() -> list[int]:
    """Place queued clusters that fit now; beat runs it as a safety net besides the retry that
    follows every release."""
    return admission.admit_queued()
