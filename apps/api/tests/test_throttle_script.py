"""ApiThrottle checks every budget of a request in one trip to the test Redis (its Lua script),
with DRF's rules: a sliding window per budget, a refused request recorded only where it was
allowed, Retry-After the longest wait; and the same decisions on a cache that is not Redis."""

import uuid

import pytest
from django.conf import settings
from django.core.cache.backends.locmem import LocMemCache
from redis import Redis
from rest_framework.test import APIClient, APIRequestFactory
from rest_framework.throttling import SimpleRateThrottle

from apps.api.throttling import ApiThrottle, Budget, check_in_redis, redis_client
from portal.cache import SharedRedisCache

from .conftest import bearer, token_for


@pytest.fixture
def rates(monkeypatch):
    rates = {"anon": "3/min", "user": "4/min", "token": "2/min"}
    monkeypatch.setattr(SimpleRateThrottle, "THROTTLE_RATES", rates)
    return rates


@pytest.fixture
def commands(monkeypatch):
    """The Redis commands the throttle sends, by name."""
    sent: list[str] = []
    original = Redis.execute_command

    def counted(self, *args, **options):
        sent.append(str(args[0]).upper())
        return original(self, *args, **options)

    monkeypatch.setattr(Redis, "execute_command", counted)
    return sent


def window(cache, key: str) -> int:
    client = redis_client(cache)
    assert client is not None
    return client.zcard(cache.make_and_validate_key(key))


def test_a_request_with_a_token_costs_one_round_trip(alice, rates, commands):
    client = bearer(token_for(alice))
    client.get("/api/v1/quota")  # the script may be loaded once (EVAL after NOSCRIPT)
    commands.clear()
    assert client.get("/api/v1/quota").status_code == 200
    assert commands == ["EVALSHA"]


def test_the_token_refuses_while_the_user_records_as_drf_did(alice, rates, throttle_cache):
    first, second = bearer(token_for(alice)), bearer(token_for(alice))
    assert [first.get("/api/v1/quota").status_code for _ in range(3)] == [200, 200, 429]
    token_id = first.get("/api/v1/quota").renderer_context["request"].auth.pk
    assert window(throttle_cache, f"throttle:token:{token_id}") == 2
    assert window(throttle_cache, f"throttle:user:{alice.pk}") == 4  # the refused ones too
    refused = second.get("/api/v1/quota")  # the user's budget is spent now
    assert refused.status_code == 429
    assert 55 <= int(refused["Retry-After"]) <= 60
    assert refused.json()["retry_after"] == int(refused["Retry-After"])


def test_anonymous_callers_have_a_budget_per_address(catalog, rates):
    def calls(address: str) -> list[int]:
        client = APIClient(REMOTE_ADDR=address)
        return [client.get("/bigdata/api/v1/products/demo").status_code for _ in range(4)]

    assert calls("192.0.2.1") == [200, 200, 200, 429]
    assert calls("192.0.2.2") == [200, 200, 200, 429]


def test_windows_slide_and_expire_with_their_period(throttle_cache):
    client = redis_client(throttle_cache)
    budget = Budget(f"throttle:test:{uuid.uuid4()}", 2, 1)
    assert check_in_redis(client, throttle_cache, [budget]) == []
    assert check_in_redis(client, throttle_cache, [budget]) == []
    (wait,) = check_in_redis(client, throttle_cache, [budget])
    assert 0 < wait <= 1
    assert 0 < client.pttl(throttle_cache.make_and_validate_key(budget.key)) <= 1000
    # Requests older than the period (Redis's clock decides) no longer count.
    old = Budget(f"throttle:test:{uuid.uuid4()}", 2, 60)
    key = throttle_cache.make_and_validate_key(old.key)
    client.zadd(key, {"long-ago-1": 1.0, "long-ago-2": 2.0})
    assert check_in_redis(client, throttle_cache, [old]) == []
    assert client.zcard(key) == 1


def test_a_budget_lowered_below_its_window_refuses_without_a_wait(throttle_cache):
    client = redis_client(throttle_cache)
    key = f"throttle:test:{uuid.uuid4()}"
    for _ in range(3):
        check_in_redis(client, throttle_cache, [Budget(key, 3, 60)])
    assert check_in_redis(client, throttle_cache, [Budget(key, 1, 60)]) == [None]


def decisions(cache, rates, monkeypatch) -> list[tuple[bool, int | None]]:
    """allow_request and the rounded wait of 4 calls of one user's token, then one of another
    token of the same user."""
    monkeypatch.setattr(SimpleRateThrottle, "cache", cache)
    factory = APIRequestFactory()
    seen = []

    class User:
        pk = uuid.uuid4().hex
        is_authenticated = True

    class Token:
        def __init__(self) -> None:
            self.pk = uuid.uuid4().hex

    one, other, user = Token(), Token(), User()
    monkeypatch.setattr("apps.api.throttling.token_of", lambda request: request.auth)
    for token in (one, one, one, one, other):
        request = factory.get("/")
        request.user, request.auth = user, token  # type: ignore[assignment]  # stand-ins
        throttle = ApiThrottle()
        allowed = throttle.allow_request(request, None)
        wait = throttle.wait()
        seen.append((allowed, round(wait) if wait is not None else None))
    return seen


def test_a_cache_that_is_not_redis_decides_the_same(rates, monkeypatch):
    in_redis = decisions(
        SharedRedisCache(settings.CACHES["default"]["LOCATION"], {"KEY_PREFIX": uuid.uuid4().hex}),
        rates,
        monkeypatch,
    )
    in_memory = decisions(LocMemCache(uuid.uuid4().hex, {}), rates, monkeypatch)
    # The token's 2/min refuses the 3rd and 4th; the user's 4/min recorded them, so it refuses
    # the user's other token.
    assert in_redis == in_memory == [(True, None)] * 2 + [(False, 60)] * 3


def test_without_an_answer_from_redis_requests_go_through(alice, rates, monkeypatch, caplog):
    monkeypatch.setattr(SimpleRateThrottle, "cache", SharedRedisCache("redis://127.0.0.1:1/0", {}))
    client = bearer(token_for(alice))
    assert [client.get("/api/v1/quota").status_code for _ in range(3)] == [200, 200, 200]
