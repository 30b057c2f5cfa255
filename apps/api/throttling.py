"""Request rates per anonymous address, per user and per token: 429 with Retry-After.

A user's scripts share the user's budget, and each token also has its own, smaller one so one
runaway script cannot starve the user's browser session or their other scripts.

`ApiThrottle` checks every budget a request draws on (anonymous: its address; signed in: the
user's, and the token's if it came with one) in one trip to Redis, a Lua script (issue 34: the
three DRF throttles took four round trips and read and wrote each budget's whole history as a
pickled list). The rules are DRF's SimpleRateThrottle's: a budget of N requests per period is
a sliding window over the last period; a request a budget allows is recorded in it, one it
refuses is not (a request refused by the token's budget still counts against the user's); the
answer is 429 when any budget refuses, with Retry-After the longest of their waits (the time
until the oldest request in the window leaves it, shared among the requests still to come).
Rates come from REST_FRAMEWORK's DEFAULT_THROTTLE_RATES ("anon", "user", "token"; None: no
limit). Redis's clock decides the windows, so web hosts with skewed clocks agree.

The windows live in the cache's Redis (sorted sets, keys throttle:<scope>:<id> under the
cache's key prefix, each expiring with its period). With another cache backend the same rules
run through the cache's get and set. Without an answer from the cache, rates go unchecked for
a while, with a warning in the log, rather than every API call failing with a 500."""

import hashlib
import logging
import os
import time
from dataclasses import dataclass

from django.core.cache.backends.redis import RedisCacheClient
from django.core.exceptions import ImproperlyConfigured
from redis import Redis
from redis.exceptions import NoScriptError, RedisError
from rest_framework.request import Request
from rest_framework.throttling import SimpleRateThrottle

from apps.tokens.authentication import token_of

log = logging.getLogger(__name__)
WARN_EVERY_SECONDS = 60
_last_warning = [float("-inf")]

# KEYS: a window per budget. ARGV: this request's member, then each budget's limit and period
# (seconds). Answers per budget: "" (allowed and recorded), "none" (refused, no wait to give)
# or the wait in seconds (refused).
CHECK = """
local now = redis.call('TIME')
local t = tonumber(now[1]) + tonumber(now[2]) / 1e6
local answers = {}
for i, key in ipairs(KEYS) do
  local limit = tonumber(ARGV[2 * i])
  local period = tonumber(ARGV[2 * i + 1])
  redis.call('ZREMRANGEBYSCORE', key, '-inf', t - period)
  local count = redis.call('ZCARD', key)
  if count < limit then
    redis.call('ZADD', key, t, ARGV[1])
    redis.call('PEXPIRE', key, math.ceil(period * 1000))
    answers[i] = ''
  else
    local oldest = tonumber(redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')[2])
    local available = limit - count + 1
    if available <= 0 then
      answers[i] = 'none'
    else
      answers[i] = tostring((period - (t - oldest)) / available)
    end
  end
end
return answers
"""
CHECK_SHA = hashlib.sha1(CHECK.encode()).hexdigest()  # noqa: S324 (Redis names scripts so)


@dataclass(frozen=True)
class Budget:
    key: str
    limit: int
    period: int  # seconds


class ApiThrottle(SimpleRateThrottle):
    """REST_FRAMEWORK's one DEFAULT_THROTTLE_CLASSES entry."""

    def __init__(self) -> None:  # no scope of its own: budgets() picks them per request
        self.waits: list[float | None] = []

    def budgets(self, request: Request) -> list[Budget]:
        if request.user and request.user.is_authenticated:
            drawn: list[tuple[str, object]] = [("user", request.user.pk)]
            token = token_of(request)
            if token is not None:
                drawn.append(("token", token.pk))
        else:
            drawn = [("anon", self.get_ident(request))]
        found = []
        for scope, ident in drawn:
            try:
                rate = self.THROTTLE_RATES[scope]
            except KeyError:
                raise ImproperlyConfigured(f"no throttle rate for the '{scope}' scope") from None
            limit, period = self.parse_rate(rate)
            if limit is not None and period is not None:  # a rate of None: no limit
                found.append(Budget(f"throttle:{scope}:{ident}", limit, period))
        return found

    def allow_request(self, request: Request, view) -> bool:
        budgets = self.budgets(request)
        if not budgets:
            return True
        try:
            client = redis_client(self.cache)
            if client is not None:
                self.waits = check_in_redis(client, self.cache, budgets)
            else:
                self.waits = [wait for ok, wait in map(self.check_in_cache, budgets) if not ok]
        except (RedisError, OSError) as error:
            now = time.monotonic()
            if now - _last_warning[0] >= WARN_EVERY_SECONDS:  # one line a minute, not a flood
                _last_warning[0] = now
                log.warning("request rates are not checked: the cache does not answer (%s)", error)
            return True
        return not self.waits

    def wait(self) -> float | None:
        known = [w for w in self.waits if w is not None]
        return max(known) if known else None

    def check_in_cache(self, budget: Budget) -> tuple[bool, float | None]:
        """DRF's own steps, for a cache that is not Redis: (allowed, the wait if refused)."""
        now = self.timer()
        history = [t for t in self.cache.get(budget.key, []) if t > now - budget.period]
        if len(history) >= budget.limit:
            available = budget.limit - len(history) + 1
            if available <= 0:
                return False, None
            return False, (budget.period - (now - history[-1])) / available
        history.insert(0, now)
        self.cache.set(budget.key, history, budget.period)
        return True, None


def redis_client(cache) -> Redis | None:
    """The Redis client behind a Django Redis cache, or None for another backend."""
    backend = getattr(cache, "_cache", None)
    return backend.get_client(write=True) if isinstance(backend, RedisCacheClient) else None


def check_in_redis(client: Redis, cache, budgets: list[Budget]) -> list[float | None]:
    """The waits of the budgets that refuse the request (none: allowed), in one round trip."""
    keys = [cache.make_and_validate_key(budget.key) for budget in budgets]
    args: list[str | int] = [os.urandom(8).hex()]
    for budget in budgets:
        args += [budget.limit, budget.period]
    try:
        answers = client.evalsha(CHECK_SHA, len(keys), *keys, *args)
    except NoScriptError:  # the first call since Redis started: it learns the script
        answers = client.eval(CHECK, len(keys), *keys, *args)
    waits: list[float | None] = []
    for answer in answers:
        if answer == b"none":
            waits.append(None)
        elif answer:
            waits.append(float(answer))
    return waits
