"""A small, valid version definition that tests bend one field at a time."""

import copy

from apps.catalog.models import Product, ProductVersion

ROLES = [
    {
        "name": "master",
        "min": 1,
        "max": 1,
        "default": 1,
        "cores": {"default": 1, "max": 2},
        "memory_mb": {"default": 512, "max": 2048},
        "disks": {"default": 1, "max": 2},
    },
    {
        "name": "worker",
        "min": 1,
        "max": 8,
        "default": 2,
        "image": "example/worker:1",
        "cores": {"default": 2, "max": 4},
        "memory_mb": {"default": 1024, "max": 4096},
        "disks": {"default": 2, "max": 6},
    },
]
SCHEMA = {
    "required": {
        "size": {
            "type": "int",
            "default": 2,
            "min": 1,
            "max": 16,
            "description": "Number of workers",
            "sets": "count",
            "roles": ["worker"],
        }
    },
    "optional": {
        "cpu": {
            "type": "int",
            "default": 2,
            "min": 1,
            "max": 12,
            "description": "Cores",
            "sets": "cores",
            "roles": ["worker"],
        },
        "disks": {
            "type": "int",
            "default": 1,
            "min": 1,
            "max": 12,
            "description": "Disks",
            "sets": "disks",
        },
        "mem": {
            "type": "int",
            "default": 1024,
            "min": 256,
            "max": 65536,
            "description": "MB",
            "sets": "memory_mb",
            "roles": ["worker"],
        },
    },
    "advanced": {
        "replication": {
            "type": "choice",
            "choices": [1, 2, 3],
            "default": 2,
            "description": "Copies",
        },
        "secure": {"type": "bool", "default": False, "description": "TLS between members"},
        "label": {
            "type": "str",
            "default": "x",
            "max_length": 8,
            "pattern": "[a-z]+",
            "description": "A label",
        },
    },
}


def make_version(**overrides) -> ProductVersion:
    """An unsaved version (no database needed) with a valid definition unless overridden."""
    fields = {
        "product": Product(name="example", title="Example"),
        "version": "1.0",
        "image": "example/base:1",
        "disk_kind": "hdd",
        "roles": copy.deepcopy(ROLES),
        "options_schema": copy.deepcopy(SCHEMA),
        "ports": [{"role": "master", "port": 8080, "name": "UI"}],
        "environment": {"MEMBERS": "{{members}}", "MASTER": "{{master_host}}"},
        "configure": [{"role": "master", "once": True, "command": ["sh", "-c", "echo {{size}}"]}],
    }
    fields.update(overrides)
    return ProductVersion(**fields)
