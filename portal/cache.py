"""Django's Redis cache with one client per Redis server and process.

Django's backend builds a new redis.Redis for every call (its constructor fills a table of
about 170 response callbacks) and keeps connection pools per cache object, and it makes a cache
object per thread, or per request under ASGI: every API request then opened a fresh connection
to Redis for its throttles and paid four client constructions (bench/api). Here every cache
object of the process shares one client, with one pool, per server; redis-py's pool is
thread-safe and starts afresh in a forked worker."""

import threading
from collections.abc import Callable
from typing import Any

from django.core.cache.backends.redis import RedisCache, RedisCacheClient
from redis import Redis

_clients: dict[str, Redis] = {}
_lock = threading.Lock()


class SharedClient(RedisCacheClient):
    # Django's own private state and helper, which django-stubs leave out.
    _servers: list[str]
    _pool_class: Any
    _pool_options: dict[str, Any]
    _client: type[Redis]
    _get_connection_pool_index: Callable[[bool], int]

    def get_client(self, key=None, *, write: bool = False) -> Redis:
        server = self._servers[self._get_connection_pool_index(write)]
        client = _clients.get(server)
        if client is None:
            with _lock:
                client = _clients.get(server)
                if client is None:
                    pool = self._pool_class.from_url(server, **self._pool_options)
                    client = _clients[server] = self._client(connection_pool=pool)
        return client


class SharedRedisCache(RedisCache):
    """CACHES' BACKEND: "portal.cache.SharedRedisCache", with Django's own options."""

    def __init__(self, server, params: dict) -> None:
        super().__init__(server, params)
        self._class = SharedClient
