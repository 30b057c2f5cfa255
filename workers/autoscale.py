"""Autoscaling, the periodic part (beat runs autoscale every AUTOSCALE_SAMPLE_SECONDS): read the
pending work of every running cluster with a policy, and once its cooldown has passed decide
(apps/clusters/autoscale.py) and ask the resize.

Each reading is the plugin's load_command in a member's container; the clusters are read at
once (IDLE_PROBE_THREADS), each within AUTOSCALE_READ_SECONDS, as idle stop reads them: a
tenant's slow or hung container costs its own reading, never another cluster's nor the pass
beyond that. What the product answers is its root users' to write: the plugin takes only
bounded numbers from it (apps.products.base.figure), and a reading that is not one is left out.

A decision with a change is an event with its figures and goes through the resize path (the
owner's quota and budgets, capacity, the plugin's pre-flight, decommission): one that cannot be
carried out is an event saying why, and the next cooldown decides again."""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime, timedelta
from functools import partial
from typing import Any

from django.conf import settings
from django.utils import timezone

from apps import nodes
from apps.clusters import autoscale as rules
from apps.clusters.container_specs import container_name
from apps.clusters.models import Cluster, ClusterEvent, Instance, LoadSample, ScalingPolicy
from apps.clusters.quotas import QuotaExceeded
from apps.clusters.resize import ResizeRefused, scaling_of
from apps.clusters.services import StateConflict
from apps.clusters.transitions import record_event
from apps.products.base import Load, answer_of
from apps.products.registry import plugin_for
from apps.usage import growth
from apps.usage.budgets import BudgetExceeded

from .idle import within_budget

log = logging.getLogger(__name__)
READ_TIMEOUT = 20  # seconds per exec


def run_pass(now: datetime | None = None) -> dict[str, list[int]]:
    """One pass: every running cluster with a policy read, and those past their cooldown
    decided. Returns the clusters read and those resized."""
    now = now or timezone.now()
    policies = list(
        ScalingPolicy.objects.filter(cluster__state=Cluster.State.RUNNING).select_related(
            "cluster__version__product", "cluster__revision"
        )
    )
    readings = read_all([p.cluster for p in policies])
    report: dict[str, list[int]] = {"read": [], "resized": []}
    for policy in policies:
        load = readings.get(policy.cluster_id)
        if load is not None:
            LoadSample.objects.create(cluster_id=policy.cluster_id, at=now, **vars(load))
            report["read"].append(policy.cluster_id)
        if due(policy, now) and decide_and_ask(policy, now):
            report["resized"].append(policy.cluster_id)
    return report


def due(policy: ScalingPolicy, now: datetime) -> bool:
    since = policy.decided_at or policy.created
    return now - since >= timedelta(seconds=policy.cooldown_seconds)


def read_all(clusters: list[Cluster]) -> dict[int, Any]:
    """Each cluster's reading (a Load), None for one that failed or took too long."""
    calls: dict[int, Callable[[], Any]] = {}
    plugins = {}
    for cluster in clusters:
        plugin = plugin_for(cluster.definition)
        command = plugin.load_command
        member = (
            Instance.objects.filter(
                cluster=cluster, role=command[0], active=True, node__isnull=False
            )
            .select_related("node")
            .order_by("index")
            .first()
            if command
            else None
        )
        if command is None or member is None or member.node is None:
            continue
        plugins[cluster.id] = plugin
        container = container_name(cluster.id, member.role, member.index)
        calls[cluster.id] = partial(_read, member.node, container, command[1])
    answers = within_budget(calls, settings.AUTOSCALE_READ_SECONDS, settings.IDLE_PROBE_THREADS)
    readings: dict[int, Any] = {}
    for cluster_id, answer in answers.items():
        if answer is None:
            continue
        try:
            readings[cluster_id] = plugins[cluster_id].load_of(answer)
        except ValueError as error:
            log.warning("cluster %s: its pending work could not be read: %s", cluster_id, error)
    return readings


def _read(node, container: str, argv: list[str]) -> Any:
    """The answer of the plugin's command in the member's container (no database here: the
    thread may be left behind past its budget)."""
    code, output = nodes.client(node).exec(container, argv, READ_TIMEOUT)
    answer = answer_of(output[-4000:], argv[0])
    if code != 0 or (isinstance(answer, dict) and "error" in answer):
        raise ValueError(f"{argv[0]} exited with {code}: {str(answer)[:200]}")
    return answer


def decide_and_ask(policy: ScalingPolicy, now: datetime) -> bool:
    """Decide on the cooldown's readings and ask the resize; whether one was asked."""
    cluster = policy.cluster
    since = policy.decided_at or policy.created
    samples = [
        Load(s.pending, s.available, s.per_worker, s.unit)
        for s in LoadSample.objects.filter(cluster=cluster, at__gt=since, at__lte=now).order_by(
            "at"
        )
    ]
    role = scaling_of(cluster).role
    current = Instance.objects.filter(cluster=cluster, role=role, active=True).count()
    decision = rules.decide(policy, samples, current, rules.floor(cluster, current))
    words = decision.words
    asked = False
    if decision.change:
        try:
            growth.request_resize(cluster.id, decision.target)
            asked = True
        except (ResizeRefused, QuotaExceeded, BudgetExceeded, StateConflict) as refused:
            words = f"{words}, not carried out: {refused}; the next cooldown decides again"
        level = ClusterEvent.Level.INFO if asked else ClusterEvent.Level.WARNING
        record_event(cluster.id, f"autoscaling: {words}", level)
    ScalingPolicy.objects.filter(id=policy.id).update(decided_at=now, decision=words[:300])
    LoadSample.objects.filter(cluster=cluster, at__lte=now).delete()
    return asked
