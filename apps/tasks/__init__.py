"""The task bus (bus.py): how any app hands work to the Celery workers, by task name, without
importing the workers package (the workers import the apps). It imports no app, so every
floor may use it (portal/tests/test_import_graph.py)."""
