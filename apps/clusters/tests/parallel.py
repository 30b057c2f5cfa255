"""Running jobs at the same instant, each thread on its own database connection."""

import threading

from django.db import connection


def run_together(jobs, connected=False):
    """Start every job at the same instant; return their results (or exceptions). With
    `connected`, each thread opens its connection before the start, so the jobs' statements
    meet instead of the first job running ahead while the others connect."""
    barrier = threading.Barrier(len(jobs))
    results = [None] * len(jobs)

    def worker(slot, job):
        try:
            if connected:
                connection.ensure_connection()
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
