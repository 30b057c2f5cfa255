"""The Celery queues, kept free of imports so `./platter` can read them before the venv exists."""

# Every queue a worker started by `./platter run` or the tests consumes (`celery worker -Q`).
ALL_QUEUES = ["celery"]
