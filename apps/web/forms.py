"""The launch form, built from a product version's options schema plus Platter's launch keys."""

from typing import Any

from django import forms

from apps.catalog.models import ProductVersion
from apps.catalog.options import DISK_KINDS, SECTIONS, option_definitions
from apps.clusters import names
from apps.clusters.models import Cluster

# Launch keys, in the section of the form each belongs to.
LAUNCH_SECTION = {"name": "required", "disk_kind": "optional", "lease": "optional",
                  "reuse_data_from": "advanced"}  # fmt: skip


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


def option_field(name: str, definition: dict) -> forms.Field:
    """A form field for one option definition (bounds are rechecked by catalog.options)."""
    common = {"required": False, "help_text": definition.get("description", ""),
              "initial": definition.get("default"), "label": option_label(name)}  # fmt: skip
    kind = definition.get("type")
    if kind == "int":
        return forms.IntegerField(
            min_value=definition.get("min"), max_value=definition.get("max"), **common
        )
    if kind == "bool":
        return forms.BooleanField(**common)
    if kind == "choice":
        choices = [(str(c), str(c)) for c in definition.get("choices") or []]
        return forms.ChoiceField(choices=choices, **common)
    return forms.CharField(max_length=definition.get("max_length", 255), **common)


class LaunchForm(forms.Form):
    name = forms.SlugField(max_length=63, help_text="Letters, digits and dashes")
    disk_kind = forms.ChoiceField(
        choices=[(k, k.upper()) for k in DISK_KINDS],
        required=False,
        help_text="Kind of every dedicated disk",
    )
    lease = forms.FloatField(
        required=False, min_value=0.01, max_value=10**6, label="Lease (hours)",
        help_text="Destroyed (data kept) when it ends; empty: no end",
    )  # fmt: skip
    reuse_data_from = forms.ModelChoiceField(
        queryset=Cluster.objects.none(), required=False, label="Reuse data of",
        help_text="A destroyed cluster of yours whose disks kept their data",
    )  # fmt: skip

    def __init__(self, version: ProductVersion, owner, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.version = version
        self.definitions = option_definitions(version)
        for name, definition in self.definitions.items():
            self.fields[name] = option_field(name, definition)
        self.fields["disk_kind"].initial = version.disk_kind
        self.fields["reuse_data_from"].queryset = Cluster.objects.filter(
            owner=owner, version__product=version.product_id, state=Cluster.State.DESTROYED
        )
        if not self.is_bound:
            self.initial.setdefault("name", default_name(owner, version))

    def section(self, section: str) -> list[forms.BoundField]:
        """Fields of one section: the version's options, then the launch keys placed there."""
        names = [n for n, d in self.definitions.items() if d["section"] == section]
        names += [n for n, s in LAUNCH_SECTION.items() if s == section]
        return [self[name] for name in names]

    def sections(self) -> list[tuple[str, list[forms.BoundField]]]:
        return [(section, self.section(section)) for section in SECTIONS]

    def options(self) -> dict[str, Any]:
        """Product options plus disk_kind, as services.launch takes them (None: default)."""
        data = self.cleaned_data
        chosen = {name: data.get(name) for name in self.definitions}
        chosen = {k: v for k, v in chosen.items() if v not in (None, "")}
        chosen["disk_kind"] = data.get("disk_kind") or self.version.disk_kind
        return chosen


def default_name(owner, version: ProductVersion) -> str:
    return names.default_name(owner, version)  # a name the owner does not use yet
