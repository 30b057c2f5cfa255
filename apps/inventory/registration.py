"""Registering a node (manage.py add_node): the rules for a new Node row. Probing the node
itself needs the drivers and lives in the node layer (apps/nodes/probe.py)."""

from django.db import IntegrityError, transaction
from django.utils.text import slugify

from .models import Node

# Where a node mounts its data disks unless told otherwise: one file system per disk in a
# folder of its own (discover_disks lists them).
DEFAULT_DISK_ROOT = "/srv/platter/disks"


class RegistrationError(Exception):
    """The node cannot be registered as asked; the message says why."""


def check_name(name: str) -> None:
    if slugify(name) != name:
        raise RegistrationError(
            f"node name {name!r}: use lower-case letters, digits and hyphens "
            f"(e.g. {slugify(name) or 'node-1'!r})"
        )
    if Node.objects.filter(name=name).exists():
        raise RegistrationError(f"a node named {name!r} is already registered")


def register_node(name: str, endpoint: str, **fields) -> Node:
    """Create the Node row; the unique name is the backstop against a concurrent add."""
    try:
        with transaction.atomic():
            return Node.objects.create(name=name, endpoint=endpoint, **fields)
    except IntegrityError:
        raise RegistrationError(f"a node named {name!r} is already registered") from None
