import time
from collections.abc import Callable

import pytest
from prometheus_client.parser import text_string_to_metric_families

from apps.metrics import recorded, store


@pytest.fixture(autouse=True)
def fresh_metrics():
    """Every test starts with nothing recorded in its Redis database."""
    store.clear(recorded.ALL)
    yield
    store.clear(recorded.ALL)


def parse(text: str) -> dict[tuple[str, tuple], float]:
    """Samples of a scrape: (sample name, sorted labels) -> value, through Prometheus' parser."""
    samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples[sample.name, tuple(sorted(sample.labels.items()))] = sample.value
    return samples


def value(samples: dict, name: str, **labels: str) -> float:
    key = (name, tuple(sorted(labels.items())))
    assert key in samples, f"no sample {name}{labels} in the scrape"
    return samples[key]


@pytest.fixture
def scrape(client, admin_user) -> Callable[[], dict]:
    """Scrape /metrics as staff; the samples."""
    client.force_login(admin_user)

    def scrape() -> dict:
        response = client.get("/metrics")
        assert response.status_code == 200, response.content
        return parse(response.content.decode())

    return scrape


def wait_for_sample(scrape: Callable[[], dict], name: str, expected: float, **labels: str):
    """Workers record right after the state they reached is visible: scrape until the sample
    shows up (or a minute passed), then return the samples."""
    deadline = time.monotonic() + 60
    while True:
        samples = scrape()
        key = (name, tuple(sorted(labels.items())))
        if samples.get(key) == expected or time.monotonic() > deadline:
            return samples
        time.sleep(0.2)
