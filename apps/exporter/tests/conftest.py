"""The recorder's scrape helpers (apps/metrics/tests/conftest.py): every test starts with
nothing recorded, and `scrape` reads /metrics as staff."""

from apps.metrics.tests.conftest import fresh_metrics, parse, scrape, value

__all__ = ["fresh_metrics", "parse", "scrape", "value"]
