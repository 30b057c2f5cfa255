"""Writing audit rows. The services that perform an action call `record` inside their own
transaction, so an action that rolls back leaves no row and one that commits always has one."""

import ipaddress

from django.contrib.auth.base_user import AbstractBaseUser
from django.contrib.auth.models import AnonymousUser, User
from django.db import models

from portal import context

from .models import AuditEvent

Action = AuditEvent.Action
# Who did something: a user, or None for the system (beat, the reconciler, a command line).
# A request's user may be typed anonymous too: no action allows one, and record() stores None.
Actor = AbstractBaseUser | AnonymousUser | None


def record(
    action: str,
    actor: Actor,
    obj: models.Model | None = None,
    *,
    object_type: str = "",
    object_id: int | None = None,
    object_repr: str = "",
    **detail: object,
) -> AuditEvent:
    """One audit row: `actor` did `action` to `obj` (or to the object named by object_type,
    object_id, object_repr when there is no instance at hand). `actor` None is the system.
    The client address and request id come from the request context, when there is one."""
    if obj is not None:
        object_type = object_type or obj._meta.label_lower
        object_id = object_id if object_id is not None else obj.pk
        object_repr = object_repr or str(obj)
    # An anonymous caller has no row to point at; no action allows one anyway.
    user = actor if isinstance(actor, User) else None
    return AuditEvent.objects.create(
        action=action,
        actor=user,
        actor_name=user.get_username() if user is not None else "",
        object_type=object_type,
        object_id=object_id,
        object_repr=object_repr[:255],
        detail=detail,
        client_address=_valid_address(context.client_address.get()),
        request_id=(context.request_id.get() or "")[:64],
    )


def _valid_address(address: str | None) -> str | None:
    # A malformed address (an odd proxy header) must not make the action itself fail.
    try:
        return str(ipaddress.ip_address(address)) if address else None
    except ValueError:
        return None
