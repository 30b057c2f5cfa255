"""The launch form, built from a product version's options schema plus Platter's launch keys."""

from typing import Any

from django import forms

from apps.catalog.models import ProductVersion
from apps.catalog.spec import DISK_KINDS, SECTIONS, Option
from apps.clusters import names
from apps.clusters.launch_requests import LEASE_MIN_HOURS, LaunchError, LaunchRequest, parse_launch
from apps.clusters.models import Cluster

# Launch keys, in the section of the form each belongs to.
LAUNCH_SECTION = {
    "name": "required",
    "disk_kind": "optional",
    "lease": "optional",
    "idle_minutes": "optional",
    "allowed_sources": "optional",
    "reuse_data_from": "advanced",
}


# Labels of the catalog's option names, which Django would show as "Cpu" or "Cache_gb".
OPTION_LABELS = {
    "cpu": "Cores per instance",
    "mem": "Memory per instance (MB)",
    "disks": "Disks per instance",
    "cache_gb": "Cache (GB)",
    "worker_reserve_mb": "Worker reserve (MB)",
    "replset": "Replica set",
    "blocksize": "Block size",
}


def option_label(name: str) -> str:
    return OPTION_LABELS.get(name) or name.replace("_", " ").capitalize()


def option_field(name: str, option: Option) -> forms.Field:
    """A field that shows one option (bounds as input hints). It only reads the input: the
    launch parser checks it, as it does for the API's."""
    common: dict[str, Any] = {
        "required": False,
        "help_text": option.description,
        "initial": option.default,
        "label": option_label(name),
    }
    if option.type == "bool":
        return forms.BooleanField(**common)  # an unticked box posts nothing: read as false
    if option.type == "choice":
        choices = [(str(c), str(c)) for c in option.choices or []]
        return forms.CharField(widget=forms.Select(choices=choices), **common)
    if option.type == "int":
        hints = {k: v for k, v in (("min", option.min), ("max", option.max)) if v is not None}
        return forms.CharField(widget=forms.NumberInput(attrs=hints), **common)
    return forms.CharField(strip=False, **common)


class LaunchForm(forms.Form):
    """The launch keys and the version's options; clean() hands them to parse_launch, which
    the REST and CESGA APIs use too, and puts each problem on its field."""

    name = forms.CharField(help_text="Letters, digits and dashes")
    disk_kind = forms.CharField(
        widget=forms.Select(choices=[(k, k.upper()) for k in DISK_KINDS]),
        required=False,
        help_text="Kind of every dedicated disk",
    )
    lease = forms.CharField(
        widget=forms.NumberInput(attrs={"min": LEASE_MIN_HOURS, "step": "any"}),
        required=False,
        label="Lease (hours)",
        help_text="Destroyed (data kept) when it ends; empty: no end",
    )
    idle_minutes = forms.CharField(
        widget=forms.NumberInput(attrs={"min": 1, "step": 1}),
        required=False,
        label="Idle stop (minutes)",
        help_text="Stopped (data kept) after this long unused; empty: your group's default",
    )
    allowed_sources = forms.CharField(
        required=False,
        label="Who may connect",
        widget=forms.TextInput(attrs={"placeholder": "e.g. 10.8.0.0/16, 192.0.2.7"}),
        help_text="IPv4 addresses or CIDRs that reach its ports directly, separated by commas "
        "or spaces; empty: only its members and the portal (SSH answers everyone with your keys)",
    )
    reuse_data_from = forms.CharField(
        widget=forms.Select(),
        required=False,
        label="Reuse data of",
        help_text="A destroyed cluster of yours whose disks kept their data",
    )

    def __init__(self, version: ProductVersion, owner, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.version = version
        self.owner = owner
        self.launch_request: LaunchRequest | None = None
        definition = version.definition
        self.sections_of = definition.option_sections
        for name, option in definition.options.items():
            self.fields[name] = option_field(name, option)
        self.fields["disk_kind"].initial = version.disk_kind
        reusable = Cluster.objects.filter(
            owner=owner, version__product=version.product_id, state=Cluster.State.DESTROYED
        )
        self.fields["reuse_data_from"].widget.choices = [("", "---------")] + [
            (str(c.id), str(c)) for c in reusable
        ]
        if not self.is_bound:
            self.initial.setdefault("name", default_name(owner, version))

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        try:
            request = parse_launch(self.version, dict(data), self.owner)
        except LaunchError as exc:
            for name, message in exc.errors.items():
                self.add_error(name if name in self.fields else None, message)
            return data
        self.launch_request = request
        data.update(
            name=request.name,
            lease=request.lease_hours,
            reuse_data_from=request.reuse_data_from,
            disk_kind=request.disk_kind,
        )
        return data

    def section(self, section: str) -> list[forms.BoundField]:
        """Fields of one section: the version's options, then the launch keys placed there."""
        names = [n for n, s in self.sections_of.items() if s == section]
        names += [n for n, s in LAUNCH_SECTION.items() if s == section]
        return [self[name] for name in names]

    def sections(self) -> list[tuple[str, list[forms.BoundField]]]:
        return [(section, self.section(section)) for section in SECTIONS]

    def options(self) -> dict[str, Any]:
        """Product options plus disk_kind, as services.launch takes them: the parsed request's,
        or (for a preview of a form with errors) the fields given so far."""
        if self.launch_request is not None:
            return {**self.launch_request.options, "disk_kind": self.launch_request.disk_kind}
        data = self.cleaned_data
        chosen = {name: data.get(name) for name in self.sections_of}
        chosen = {k: v for k, v in chosen.items() if v not in (None, "")}
        chosen["disk_kind"] = data.get("disk_kind") or self.version.disk_kind
        return chosen


def default_name(owner, version: ProductVersion) -> str:
    return names.default_name(owner, version)  # a name the owner does not use yet
