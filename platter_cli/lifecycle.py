"""The cluster life cycle as the portal publishes it (GET /api/v1/states, apps.clusters.states
on the portal): which states are over, which write logs, the launch's phases. The command
asks once per run and keeps no copy of those rules; only a portal older than that endpoint
gets FALLBACK, the rules as they stood when it was added."""

from dataclasses import dataclass

from .api import Api
from .errors import CliError, ExitCode

# For portals without GET /api/v1/states (404): their states and columns as of then.
FALLBACK = {
    "states": [
        {"name": "queued", "live": True, "logs": False, "phase": True},
        {"name": "placing", "live": True, "logs": True, "phase": True},
        {"name": "configuring", "live": True, "logs": True, "phase": True},
        {"name": "running", "live": True, "logs": True, "phase": False},
        {"name": "degraded", "live": True, "logs": True, "phase": False},
        {"name": "stopping", "live": True, "logs": True, "phase": False},
        {"name": "stopped", "live": True, "logs": False, "phase": False},
        {"name": "destroying", "live": True, "logs": False, "phase": False},
        {"name": "destroyed", "live": False, "logs": False, "phase": False},
        {"name": "failed", "live": False, "logs": False, "phase": False},
    ],
    "operations": [
        {"name": "launch", "through": ["queued", "placing", "configuring"], "ends_in": "running"},
    ],
}


@dataclass(frozen=True)
class LifeCycle:
    states: list[dict]
    operations: dict[str, dict]

    @classmethod
    def of(cls, body: dict) -> "LifeCycle":
        return cls(body["states"], {op["name"]: op for op in body["operations"]})

    def having(self, column: str) -> set[str]:
        return {s["name"] for s in self.states if s.get(column)}

    @property
    def ended(self) -> set[str]:
        """States nothing comes back from (destroyed, failed)."""
        return {s["name"] for s in self.states} - self.having("live")

    @property
    def logging(self) -> set[str]:
        """States in which a cluster's containers may write log lines."""
        return self.having("logs")

    @property
    def launch_phases(self) -> list[str]:
        """The launch's phases in order, then the state it ends in."""
        launch = self.operations["launch"]
        return [s for s in launch["through"] if s in self.having("phase")] + [launch["ends_in"]]

    @property
    def launch_over(self) -> set[str]:
        """States in which a launch has ended, well or not."""
        return {s["name"] for s in self.states} - set(self.operations["launch"]["through"])


_known: dict[str, LifeCycle] = {}


def life_cycle(client: Api) -> LifeCycle:
    """The portal's life cycle, asked once per portal and run."""
    if client.url not in _known:
        try:
            body = client.get("states")
        except CliError as error:
            if error.exit_code != ExitCode.NOT_FOUND:
                raise
            body = FALLBACK  # a portal older than the endpoint
        _known[client.url] = LifeCycle.of(body)
    return _known[client.url]
