"""Calls to several nodes at once: one slow or dead node costs its own timeout, not everyone's."""

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor


def parallel(action: Callable, items: list, timeout: float | None = None) -> list:
    """action(item) for every item at once; each result is a value or the exception raised.
    The actions must not touch the database: the calling thread records what happened."""
    if not items:
        return []
    with ThreadPoolExecutor(max_workers=min(32, len(items))) as pool:
        futures = [pool.submit(action, item) for item in items]
        results = []
        for future in futures:
            try:
                results.append(future.result(timeout=timeout))
            except Exception as error:  # noqa: BLE001 (handed back to the caller to sort)
                results.append(error)
        return results
