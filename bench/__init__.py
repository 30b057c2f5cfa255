"""Platter's benchmarks (bench/README.md), a module each: `.venv/bin/python bench/<name>` (the
executable beside each module) or `.venv/bin/python -m bench.<name>` from the checkout. They run
on the development settings unless DJANGO_SETTINGS_MODULE names others."""

import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings.dev")
