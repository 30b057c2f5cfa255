"""/metrics, the portal's Prometheus exporter: gauges read from the clusters, the inventory and
usage at scrape time (collector.py), with the histograms and counters the processes recorded
through apps.metrics, for staff or a scraper with the token (access.py).

It sits above the apps it reads (portal/tests/test_import_graph.py); the recorder, which every
floor uses, stays below them all in apps/metrics."""
