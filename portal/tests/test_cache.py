"""The cache shares one Redis client per server across threads (and so across requests)."""

import threading
import uuid

from django.conf import settings

from portal.cache import SharedRedisCache


def a_cache() -> SharedRedisCache:
    return SharedRedisCache(settings.CACHES["default"]["LOCATION"], {})


def test_it_gives_every_cache_object_and_thread_the_same_client():
    seen = []
    threads = [
        threading.Thread(target=lambda: seen.append(a_cache()._cache.get_client(write=True)))
        for _ in range(4)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(seen) == 4 and len({id(client) for client in seen}) == 1


def test_it_reads_what_another_cache_object_wrote():
    key = f"cache-test-{uuid.uuid4()}"
    a_cache().set(key, [1.5, 2.5], 30)
    assert a_cache().get(key) == [1.5, 2.5]
    a_cache().delete(key)
    assert a_cache().get(key, "gone") == "gone"
