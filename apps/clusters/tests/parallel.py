"""Running jobs at the same instant, each thread on its own database connection."""

import threading

from django.db import connection


def run_together(jobs):
    """Start every job at the same instant; return their results (or exceptions)."""
    barrier = threading.Barrier(len(jobs))
    results = [None] * len(jobs)

    def worker(slot, job):
        try:
            barrier.wait()
            results[slot] = job()
        except Exception as error:  # noqa: BLE001  (reported by the test, not swallowed)
            results[slot] = error
        finally:
            connection.close()

    threads = [threading.Thread(target=worker, args=(i, j)) for i, j in enumerate(jobs)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    return results
