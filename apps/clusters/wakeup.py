"""Waking the admission queue when capacity comes back, in one place: every release
(reservation.release, leftovers.release) and every inventory change that brings capacity back
(a node or a disk in service again: apps.inventory.services sends capacity_back, which
on_capacity_back receives) calls wake_queue(). Beat's admit pass (every 30 s) is only the net
under it.

The admission pass reserves clusters, a reservation may fail one, a failure releases what the
cluster held and a release wakes the queue: the calls go round, so the imports must not. This
module imports nothing of the app (only the task bus); ClustersConfig.ready() hands it the pass
(admission.admit_queued) once every module is loaded, and connects on_capacity_back."""

import logging
from collections.abc import Callable
from typing import Literal

from django.conf import settings
from django.db import transaction

from apps.tasks import bus

log = logging.getLogger(__name__)

_admission_pass: Callable[[], object] | None = None


def use_admission_pass(admit: Callable[[], object]) -> None:
    """The pass a release runs (ClustersConfig.ready() gives admission.admit_queued)."""
    global _admission_pass
    _admission_pass = admit


def wake_queue(after: Literal["release", "inventory"]) -> None:
    """Offer the queued clusters the capacity that came back, once this transaction commits.
    After a release the pass runs here, in this process, when SCHEDULER_ADMIT_ON_RELEASE
    (off: beat's pass does it)."""
    if after == "inventory":
        # A node or disk back in service (an admin's request, the reconciler's health check)
        # hands the pass to the workers whatever SCHEDULER_ADMIT_ON_RELEASE says.
        bus.dispatch(bus.ADMIT)
    elif settings.SCHEDULER_ADMIT_ON_RELEASE:
        transaction.on_commit(_admit)


def on_capacity_back(**kwargs) -> None:
    """The inventory's capacity_back signal: a node or a disk is back in service."""
    wake_queue("inventory")


def _admit() -> None:
    if _admission_pass is None:  # (Django not set up: nothing to admit with)
        log.error("the admission pass is not set (ClustersConfig.ready did not run)")
        return
    _admission_pass()  # never raises: see admission.admit_queued
