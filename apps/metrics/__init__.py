"""The recorder every floor uses: histograms and counters kept in Redis (store.py, recorded.py)
and the Celery signal handlers that count tasks (celery_signals.py). /metrics, which reads them
with the gauges of the clusters and the inventory, is apps/exporter."""
