"""Changing quotas: every change (the admin form, its bulk action, the API) goes through here
so it is audited with the limits before and after."""

from collections.abc import Iterable

from django.db import transaction

from apps.audit.services import Action, Actor, record

from .models import LIMIT_FIELDS, Quota


def _holder(quota: Quota) -> str:
    return str(quota.user or quota.group)


def _audit(quota: Quota, before: dict | None, after: dict | None, actor: Actor) -> None:
    """One row with the limits that changed, old -> new (all of them when the quota is
    created or deleted, where the missing side is None); nothing when nothing changed."""
    if before is not None and after is not None:
        changed = [name for name in after if before[name] != after[name]]
        if not changed:
            return
        before = {name: before[name] for name in changed}
        after = {name: after[name] for name in changed}
    record(Action.QUOTA_CHANGE, actor, quota, old=before, new=after)


def _stored(quota_id: int) -> tuple[dict, Quota]:
    """The stored limits and holder, locked until the change commits."""
    locked = Quota.objects.select_for_update(of=("self",)).select_related("user", "group")
    stored = locked.get(id=quota_id)
    return {**stored.limits(), "holder": _holder(stored)}, stored


@transaction.atomic
def save_quota(quota: Quota, *, actor: Actor = None) -> Quota:
    """Create the quota, or store the limits (and holder) it now has, auditing the change."""
    before = None
    if quota.pk is not None:
        before, _ = _stored(quota.pk)
    quota.save()
    _audit(quota, before, {**quota.limits(), "holder": _holder(quota)}, actor)
    return quota


@transaction.atomic
def delete_quota(quota: Quota, *, actor: Actor = None) -> None:
    """Delete a quota: its holder falls back to the default limits (or to none, a group)."""
    before, stored = _stored(quota.pk)
    _audit(stored, before, None, actor)
    stored.delete()


@transaction.atomic
def set_limits(quota_ids: Iterable[int], changes: dict, *, actor: Actor = None) -> int:
    """Set the same limits on several quotas (None: unlimited); one audit row per quota that
    changed. Returns how many quotas were selected."""
    unknown = set(changes) - set(LIMIT_FIELDS)
    if unknown:
        raise ValueError(f"not quota limits: {', '.join(sorted(unknown))}")
    count = 0
    for quota_id in sorted(set(quota_ids)):  # one lock order, so two bulk changes never deadlock
        before, quota = _stored(quota_id)
        if changes:
            for name, value in changes.items():
                setattr(quota, name, value)
            quota.save(update_fields=list(changes))
        _audit(quota, before, {**quota.limits(), "holder": before["holder"]}, actor)
        count += 1
    return count
