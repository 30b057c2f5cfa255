"""Celery signal handlers: the request id follows the work into tasks, a task's log lines
carry its cluster id, and every task's outcome is counted.

Connected from MetricsConfig.ready(), which runs in web processes (they publish) and in
workers (they run tasks) alike.
"""

import functools
import inspect
from collections.abc import Callable
from contextlib import ExitStack
from typing import Any

from celery import Task
from celery.signals import before_task_publish, task_failure, task_postrun, task_prerun

from portal import context

from .recorded import TASK_FAILURES, TASKS

# Message header carrying the id of the request (or task) that sent the task.
REQUEST_ID_HEADER = "platter_request_id"

# Task id -> the context bound while it runs; prerun and postrun run in the task's thread.
_bound: dict[str, ExitStack] = {}


@before_task_publish.connect
def carry_request_id(headers: dict | None = None, **_: object) -> None:
    request_id = context.request_id.get()
    if request_id and headers is not None:
        headers[REQUEST_ID_HEADER] = request_id


@functools.cache
def _signature_with_cluster_id(run: Callable[..., Any]) -> inspect.Signature | None:
    signature = inspect.signature(run)
    return signature if "cluster_id" in signature.parameters else None


def cluster_id_of(task: Task, args: tuple, kwargs: dict) -> int | None:
    """The cluster a task works on: its `cluster_id` argument, when it has one."""
    signature = _signature_with_cluster_id(task.run)
    if signature is None:
        return None
    try:
        value = signature.bind_partial(*args, **kwargs).arguments.get("cluster_id")
    except TypeError:  # called with arguments it does not take: Celery will say so
        return None
    return value if isinstance(value, int) else None


@task_prerun.connect
def bind_task_context(
    task_id: str, task: Task, args: tuple = (), kwargs: dict | None = None, **_: object
) -> None:
    stack = ExitStack()
    stack.enter_context(
        context.bound(
            request_id=getattr(task.request, REQUEST_ID_HEADER, None),
            cluster_id=cluster_id_of(task, args or (), kwargs or {}),
        )
    )
    _bound[task_id] = stack


@task_postrun.connect
def unbind_task_context(task_id: str, task: Task, state: str | None = None, **_: object) -> None:
    stack = _bound.pop(task_id, None)
    if stack is not None:
        stack.close()
    TASKS.inc(task=task.name, state=state or "UNKNOWN")


@task_failure.connect
def count_task_failure(sender: Task, **_: object) -> None:
    TASK_FAILURES.inc(task=sender.name)
