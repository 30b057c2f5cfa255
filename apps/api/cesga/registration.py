"""CESGA's four registration calls as plain functions (the views in registration_views stay thin).

POST /products makes the product and a disabled version; PUT template and PUT options store
their text; once both are there the template is converted (apps.catalog.cesga_import) into the
version's roles and options and the version is enabled, as a new revision. Each call is one
transaction: a template or options Platter refuses leave the version as it was."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from django.core.exceptions import ValidationError
from django.core.validators import URLValidator
from django.db import transaction

from apps.catalog.cesga_import import RegistrationError, check_options, convert
from apps.catalog.models import Product, ProductVersion
from apps.catalog.revisions import current_revision

from .models import CesgaRegistration

PRODUCT_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,62}")
VERSION_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,31}")
MAX_DESCRIPTION = 4000
MAX_ORCHESTRATOR = 256 * 1024


class AlreadyInCatalog(Exception):
    """The version exists and was not registered through CESGA's calls."""


@dataclass
class Outcome:
    registration: CesgaRegistration
    created: bool = False
    warnings: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        version = self.registration.version
        return {
            "name": version.product.name,
            "version": version.version,
            "enabled": version.enabled,
            "missing": self.registration.missing,
            "warnings": self.warnings,
            "roles": [
                {"name": r["name"], "count": r["default"], "image": r.get("image", version.image)}
                for r in version.roles
            ],
        }


def no_nul(what: str, value: Any) -> None:
    """PostgreSQL stores no NUL character in text or JSON: refuse it here, naming the part."""
    text = value if isinstance(value, str) else json.dumps(value)
    if "\x00" in text or "\\u0000" in text:
        raise RegistrationError(f"{what}: contains a NUL character")


def register(user, body: Any) -> Outcome:
    """POST /products: {name, version, description, logo_url}."""
    if not isinstance(body, dict):
        raise RegistrationError("body: must be a JSON object with name, version, description")
    no_nul("body", body)
    name, number = body.get("name"), body.get("version")
    if not isinstance(name, str) or not PRODUCT_NAME.fullmatch(name):
        raise RegistrationError(
            f"name: lower-case letters, digits, - and _ (at most 63), got {name!r}"[:200]
        )
    if not isinstance(number, str) or not VERSION_NAME.fullmatch(number):
        raise RegistrationError(
            f"version: letters, digits, . - and _ (at most 32), got {number!r}"[:200]
        )
    description = body.get("description", "")
    if not isinstance(description, str) or len(description) > MAX_DESCRIPTION:
        raise RegistrationError(f"description: text of at most {MAX_DESCRIPTION} characters")
    logo_url = body.get("logo_url") or ""
    try:
        if logo_url:
            URLValidator(schemes=["http", "https"])(logo_url)
    except (ValidationError, TypeError):
        raise RegistrationError("logo_url: must be an http(s) address") from None

    with transaction.atomic():
        product, _ = Product.objects.get_or_create(
            name=name, defaults={"title": name, "description": description}
        )
        version = (
            ProductVersion.objects.select_for_update()
            .filter(product=product, version=number)
            .first()
        )
        if version is not None and not CesgaRegistration.objects.filter(version=version).exists():
            raise AlreadyInCatalog(f"{name} {number} is already in the catalog")
        created = version is None
        if version is None:
            # Disabled, with no roles, until its template and options make its definition.
            version = ProductVersion.objects.create(
                product=product, version=number, description=description, enabled=False
            )
            registration = CesgaRegistration.objects.create(
                version=version, logo_url=logo_url, registered_by=user
            )
        else:
            version.description = description
            version.save(update_fields=["description"])
            registration = version.cesga_registration
            registration.logo_url = logo_url
            registration.save(update_fields=["logo_url", "updated"])
    return Outcome(registration, created=created, warnings=list(registration.warnings))


def find(name: str, number: str) -> CesgaRegistration | None:
    return (
        CesgaRegistration.objects.select_related("version__product")
        .filter(version__product__name=name, version__version=number)
        .first()
    )


def put_template(user, registration: CesgaRegistration, text: str) -> Outcome:
    no_nul("template", text)
    return _update(user, registration, template=text)


def put_options(user, registration: CesgaRegistration, options: Any) -> Outcome:
    no_nul("options", options)
    check_options(options)  # refused at once, even before the template is there
    return _update(user, registration, options=options)


def put_orchestrator(registration: CesgaRegistration, text: str) -> Outcome:
    """Stored for the admin to read and convert; never executed by the portal."""
    no_nul("orchestrator", text)
    if len(text) > MAX_ORCHESTRATOR:
        raise RegistrationError(f"orchestrator: longer than {MAX_ORCHESTRATOR} characters")
    registration.orchestrator = text
    registration.save(update_fields=["orchestrator", "updated"])
    return Outcome(registration, warnings=list(registration.warnings))


def _update(user, registration: CesgaRegistration, **changes: Any) -> Outcome:
    with transaction.atomic():
        registration = CesgaRegistration.objects.select_for_update().get(pk=registration.pk)
        for name, value in changes.items():
            setattr(registration, name, value)
        warnings: list[str] = []
        if not registration.missing:
            converted = convert(registration.template, registration.options)
            no_nul("template (rendered)", converted.rendered)
            _apply(registration.version, converted)
            registration.rendered, registration.warnings = converted.rendered, converted.warnings
            warnings = converted.warnings
        registration.save()
        if not registration.missing:
            _record_revision(registration.version, user)
    return Outcome(registration, warnings=warnings)


def _apply(version: ProductVersion, converted) -> None:
    version.image = converted.image
    version.roles = converted.roles
    version.options_schema = converted.options_schema
    version.enabled = True
    # The admin's configure steps (converted from the orchestrator) stay, checked against the
    # new roles by full_clean.
    try:
        version.full_clean()
    except ValidationError as exc:
        problems = "; ".join(f"{k}: {' '.join(v)}" for k, v in exc.message_dict.items())
        raise RegistrationError(f"the converted definition is refused: {problems}") from None
    version.save()


def _record_revision(version: ProductVersion, user) -> None:
    current_revision(version, actor=user)  # the registration is revision 1, a re-PUT the next
