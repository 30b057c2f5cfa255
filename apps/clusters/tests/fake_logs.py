"""A fake node log for tests that do not reach the lab: 30 timestamped lines per container,
answered with Docker's tail and since rules."""

from datetime import datetime

from apps.nodes import NodeClient

LINES = [(f"2026-11-24T17:00:{i:02d}.123456789Z", f"line {i}") for i in range(30)]


def fake_log(node, container, tail, *, since=None, timestamps=False, lines=LINES) -> str:
    """Docker's answer: the last `tail` lines, of those at or after `since` (seconds)."""
    found = [(at, text) for at, text in lines[-tail:] if since is None or _seconds(at) >= since]
    return "".join(f"{at} {text}\n" if timestamps else f"{text}\n" for at, text in found)


def _seconds(at: str) -> float:
    return datetime.fromisoformat(at[:26] + "+00:00").timestamp()


def install(monkeypatch, status: str | None = "running", lines=LINES) -> list[str]:
    """Replace the node calls; returns the list of containers whose log was read."""
    asked = []

    def logs(client, container, tail, **options):
        asked.append(container)
        return fake_log(client.node, container, tail, lines=lines, **options)

    monkeypatch.setattr(NodeClient, "logs", logs)
    monkeypatch.setattr(NodeClient, "container_state", lambda client, container: status)
    return asked
