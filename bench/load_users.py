"""bench/load's simulated users: asyncio tasks, each with a personal token and its own httpx
client, launching, watching, stopping, starting, extending and destroying demo clusters through
the API, and what they saw (every request's kind, status and latency; time to running)."""

import asyncio
import random
import time
from dataclasses import dataclass, field
from datetime import datetime

import httpx

PRODUCT = "/api/v1/products/demo/1.0"
QUEUE_PATIENCE_S = 15  # a user cancels a cluster queued longer than this


@dataclass
class Sample:
    kind: str  # launch, detail, list, stop, start, extend, destroy
    status: int  # 0: no answer (connection error, timeout)
    seconds: float
    at: float  # since the start of the load
    refusal: str = ""  # a 4xx's error code, and the quota limit it names


@dataclass
class Recorder:
    started: float = field(default_factory=time.monotonic)
    load_seconds: float = 0.0  # length of the phase in which users launched
    samples: list[Sample] = field(default_factory=list)
    launched: set[int] = field(default_factory=set)
    to_running: dict[int, float] = field(default_factory=dict)  # created -> first running
    placing_to_running: dict[int, float] = field(default_factory=dict)  # without the queue
    failed: dict[int, str] = field(default_factory=dict)  # failed clusters and their reasons
    cancelled: set[int] = field(default_factory=set)  # given up on while queued

    def record(self, kind: str, status: int, seconds: float, refusal: str = "") -> None:
        at = time.monotonic() - self.started
        self.samples.append(Sample(kind, status, seconds, at, refusal))

    def of(self, kind: str | None = None) -> list[Sample]:
        return [s for s in self.samples if kind is None or s.kind == kind]

    def server_errors(self) -> list[Sample]:
        return [s for s in self.samples if s.status >= 500 or s.status == 0]


def refusal_of(response: httpx.Response) -> str:
    """'quota_exceeded max_clusters', 'conflict', ...: what a 4xx names, for the report."""
    try:
        body = response.json()
    except ValueError:
        return f"{response.status_code} (no JSON)"
    limit = (body.get("quota") or {}).get("limit", "")
    return f"{body.get('error', response.status_code)} {limit}".strip()


def seconds_between(start: str | None, end: str | None) -> float | None:
    if not (start and end):
        return None
    return (datetime.fromisoformat(end) - datetime.fromisoformat(start)).total_seconds()


# ------------------------------------------------------------------ one simulated user


@dataclass
class Mine:
    url: str
    since: float  # when the user launched it (monotonic)
    state: str = "queued"


class User:
    """A script with a personal token: launches, watches, stops, starts, extends, destroys."""

    def __init__(self, number: int, client: httpx.AsyncClient, recorder: Recorder, seed: int):
        self.number, self.client, self.recorder = number, client, recorder
        self.rng = random.Random(seed)  # noqa: S311 (load shape, not secrets)
        self.mine: dict[int, Mine] = {}
        self.launches = 0

    async def call(self, kind: str, method: str, url: str, **kwargs) -> httpx.Response | None:
        started = time.perf_counter()
        try:
            response = await self.client.request(method, url, **kwargs)
        except httpx.HTTPError:
            self.recorder.record(kind, 0, time.perf_counter() - started)
            return None
        seconds = time.perf_counter() - started
        refusal = refusal_of(response) if 400 <= response.status_code < 500 else ""
        self.recorder.record(kind, response.status_code, seconds, refusal)
        if response.status_code == 429:  # honour the throttle, as a well-behaved script does
            await asyncio.sleep(min(float(response.headers.get("Retry-After", 1)), 5))
        return response

    async def run(self, until: float) -> None:
        while time.monotonic() < until:
            roll = self.rng.random()
            if roll < 0.1:
                await self.call("list", "GET", "/api/v1/clusters")
            elif roll < 0.15 or (roll < 0.5 and len(self.mine) < 2) or not self.mine:
                await self.launch()  # now and then beyond the quota: the 403 names the limit
            else:
                await self.tend(self.rng.choice(list(self.mine)))
            await asyncio.sleep(self.rng.uniform(0.2, 0.6))

    async def launch(self) -> None:
        self.launches += 1
        body = {
            "size": self.rng.choice([1, 1, 2]),
            "disks": 1,
            "lease": 2,
            "name": f"u{self.number}-{self.launches}",
        }
        response = await self.call("launch", "POST", PRODUCT, json=body)
        if response is not None and response.status_code == 202:
            cluster = response.json()["id"]
            self.recorder.launched.add(cluster)
            self.mine[cluster] = Mine(response.headers["Location"], time.monotonic())

    async def refresh(self, cluster: int) -> dict | None:
        response = await self.call("detail", "GET", self.mine[cluster].url)
        if response is None or response.status_code != 200:
            return None
        body = response.json()
        self.mine[cluster].state = body["state"]
        if body["state"] == "running" and cluster not in self.recorder.to_running:
            stamps = body["timestamps"]
            waited = seconds_between(stamps["created"], stamps["running"])
            if waited is not None:
                self.recorder.to_running[cluster] = waited
                worked = seconds_between(stamps["placing"], stamps["running"])
                self.recorder.placing_to_running[cluster] = worked if worked is not None else waited
        if body["state"] == "failed":
            self.recorder.failed[cluster] = body["reason"]
        return body

    async def tend(self, cluster: int) -> None:
        """Look at one of my clusters and do what a user would do with it in that state."""
        body = await self.refresh(cluster)
        if body is None:
            return
        mine, roll = self.mine[cluster], self.rng.random()
        if mine.state == "destroyed":
            del self.mine[cluster]
        elif mine.state == "failed":
            await self.destroy(cluster)  # gives back whatever a failure left
        elif mine.state in ("running", "degraded"):
            if roll < 0.15:
                await self.call("stop", "POST", f"{mine.url}/stop")
            elif roll < 0.3:
                await self.call("extend", "POST", f"{mine.url}/extend", json={"hours": 1})
            elif roll < 0.6:
                await self.destroy(cluster)
        elif mine.state == "stopped":
            if roll < 0.7:
                await self.call("start", "POST", f"{mine.url}/start")
            else:
                await self.destroy(cluster)
        elif mine.state == "queued" and time.monotonic() - mine.since > QUEUE_PATIENCE_S:
            self.recorder.cancelled.add(cluster)
            await self.destroy(cluster)

    async def destroy(self, cluster: int) -> None:
        keep = self.rng.random() < 0.5
        params = {"keep_data": "true" if keep else "false"}
        await self.call("destroy", "DELETE", self.mine[cluster].url, params=params)

    async def wind_down(self, deadline: float) -> None:
        """Destroy everything left and watch it go, until the deadline."""
        while self.mine and time.monotonic() < deadline:
            for cluster in list(self.mine):
                body = await self.refresh(cluster)
                state = body["state"] if body else None
                if state == "destroyed":
                    del self.mine[cluster]
                elif state is not None and state != "destroying":
                    await self.destroy(cluster)  # 409 while it stops or starts: ask again
            await asyncio.sleep(0.5)


async def drive(url: str, tokens: list[str], duration: float, settle: float, seed: int) -> Recorder:
    """Every user at once for `duration` seconds, then the wind-down (at most `settle`)."""
    recorder = Recorder()
    clients = [
        httpx.AsyncClient(base_url=url, timeout=30, headers={"Authorization": f"Bearer {token}"})
        for token in tokens
    ]
    users = [User(n, client, recorder, seed * 1000 + n) for n, client in enumerate(clients, 1)]
    try:
        until = time.monotonic() + duration
        await asyncio.gather(*(user.run(until) for user in users))
        recorder.load_seconds = time.monotonic() - recorder.started
        deadline = time.monotonic() + settle
        await asyncio.gather(*(user.wind_down(deadline) for user in users))
    finally:
        await asyncio.gather(*(client.aclose() for client in clients))
    return recorder
