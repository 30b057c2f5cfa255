"""Revisions: the definition of a version as it was when a cluster launched with it.

A ProductVersion is the editable head. `current_revision` freezes its definition fields into a
ProductRevision (only when they changed since the last one); a cluster stores the revision it
launched with and is built from `definition_of` it ever after, whatever the head says now.
"""

from __future__ import annotations

import difflib
import json
from typing import TYPE_CHECKING, Any

from django.db import transaction

from .models import ProductRevision, ProductVersion

if TYPE_CHECKING:
    from django.contrib.auth.models import AnonymousUser, User

# The fields that decide what a cluster's containers are; the rest of a version (description,
# enabled, trusted) is about who may launch it, and stays live.
DEFINITION_FIELDS = (
    "image",
    "roles",
    "options_schema",
    "disk_kind",
    "ports",
    "environment",
    "configure",
    "capabilities",
    "plugin",
)


def snapshot(version: ProductVersion) -> dict[str, Any]:
    """The version's definition fields as one JSON object."""
    return {name: getattr(version, name) for name in DEFINITION_FIELDS}


def current_revision(
    version: ProductVersion, actor: User | AnonymousUser | None = None
) -> ProductRevision:
    """The revision holding the version's definition as saved now: the latest one if nothing
    changed since, else a new one numbered next (made by `actor`, if a person edited it).

    The version's row is locked, so parallel launches of a never-revised version make one
    revision, not two."""
    with transaction.atomic():
        head = ProductVersion.objects.select_for_update().get(pk=version.pk)
        current = snapshot(head)
        latest = head.revisions.order_by("-number").first()
        if latest is not None and latest.definition == current:
            return latest
        user = actor if actor is not None and actor.is_authenticated else None
        return ProductRevision.objects.create(
            version=head,
            number=(latest.number if latest else 0) + 1,
            definition=current,
            created_by=user,
        )


def definition_of(revision: ProductRevision, version: ProductVersion) -> ProductVersion:
    """An unsaved, unsavable ProductVersion carrying the revision's definition and the live
    version's identity and access fields (trust taken back still stops a start).

    Code that reads a version's attributes (plans, templating, connection strings) reads this
    instead of the head, and so sees the definition the cluster launched with."""
    frozen = ProductVersion(
        id=version.id,
        product_id=version.product_id,
        version=version.version,
        description=version.description,
        trusted=version.trusted,
        enabled=version.enabled,
        created=version.created,
        **{name: revision.definition.get(name) for name in DEFINITION_FIELDS if name != "plugin"},
        # A revision made before plugins were named has none: the generic plugin's.
        plugin=revision.definition.get("plugin") or "",
    )
    if ProductVersion.product.is_cached(version):  # no query for an already loaded product
        frozen.product = version.product

    def refuse(*args: object, **kwargs: object) -> None:
        raise ValueError(f"{frozen} r{revision.number} is a frozen revision: edit the version")

    # It has the head's id (for anything keyed by it): a save would overwrite the head.
    frozen.save = refuse  # type: ignore[method-assign]
    return frozen


def revision_diff(a: ProductRevision | None, b: ProductRevision) -> str:
    """A unified diff of two revisions' definitions as indented JSON (a None `a`: everything
    in `b` is new)."""
    before = _pretty(a.definition) if a is not None else []
    return "".join(
        difflib.unified_diff(
            before,
            _pretty(b.definition),
            fromfile=f"revision {a.number}" if a is not None else "(none)",
            tofile=f"revision {b.number}",
        )
    )


def _pretty(definition: dict[str, Any]) -> list[str]:
    return (json.dumps(definition, indent=2, sort_keys=True) + "\n").splitlines(keepends=True)
