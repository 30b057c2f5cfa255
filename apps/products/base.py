"""The product-plugin interface: everything a product does beyond its data.

What a product *is* (roles, options, ports, start and health scripts) is data: the catalog's
version definition and the image. What it *does* that needs code lives in one folder per
product (apps/products/<name>/plugin.py) behind ``ProductPlugin``:

- whether and how it resizes: a pre-flight refusal in the user's words (``resize_refusal``),
  options written out before a grow (``pinned_options``), new members admitted or joined
  (``admit``, ``join``), leaving ones drained (``drain``), and the words shown meanwhile
  (``drain_words``);
- its job kinds (``jobs``: argv, kill, application id, UI page);
- its signals of use for idle stop (``usage_probes``);
- its notebook readiness (``notebook_probe``);
- vertical resize: whether it uses changed memory without a restart (``memory_live``) and
  when an instance restarted with new figures is back (``restarted``);
- autoscaling: what "pending work" means for it (``load_command`` run in a member's
  container, its answer read by ``load_of``);
- connection strings the catalog's templates cannot express (``connections``).

How a product plugs in: write a class with these members (subclass ``BasePlugin`` to take
the fail-closed defaults), put it in apps/products/<name>/plugin.py, add its name to
apps/products/registry.py, and name it in each of its versions' definitions (``"plugin":
"<name>"`` in apps/products/<name>/catalog.json). A definition without a plugin gets the
generic one (generic.py), which refuses to resize a role that keeps state.

Layering: this package sits below the catalog (which validates plugin names) and the
clusters app (which asks for refusals); the workers hand a plugin an ``Operator`` for its
node work. So nothing here imports another app but apps.nodes: the plugins see the cluster
through ``Member`` records and the operator, never through the clusters' models."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol, runtime_checkable


class StepFailed(Exception):
    """A step of the life cycle failed on a node (a command exited non-zero, a container did
    not start); workers/lifecycle.py raises it, a plugin may catch it to put things back."""


class ResizeFailed(Exception):
    """A resize cannot finish; what it changed is put back and the message is the reason a
    user reads (the cluster runs on as it was)."""


COMMAND_NOT_FOUND = 127  # the shell's exit status for a command the container does not have


def answer_of(output: str, command: str) -> Any:
    """An admin command's JSON answer (``/opt/platter/bin/<product>-admin``, in each image):
    its last line that is JSON (a JVM or a Python library may have warned before it)."""
    for line in reversed(output.strip().splitlines()):
        if line[:1] in "{[":
            try:
                return json.loads(line)
            except ValueError:
                continue
    raise ResizeFailed(f"{command} gave no answer: {output.strip()[-300:]}")


def admin(op: Operator, on: Member, command: list[str], timeout: int = 120) -> Any:
    """Run a product's admin command in a member's container and return its JSON answer;
    ResizeFailed in the command's own words when it refuses or fails (exit status not 0, or
    an answer {"error": ...})."""
    code, output = op.exec(on, command, timeout)
    if code == COMMAND_NOT_FOUND:
        raise ResizeFailed(
            f"{on.hostname}'s image has no {command[0]}: it is older than this portal's "
            f"{command[0]}; launch the cluster again reusing its data, on the current image, "
            "to resize it"
        )
    found = answer_of(output, command[0])
    error = found.get("error") if isinstance(found, dict) else None
    if code != 0 or error:
        raise ResizeFailed(str(error or f"{' '.join(command[:2])} exited with {code}"))
    return found


@dataclass(frozen=True)
class ResizeAsk:
    """A resize as the rules see it before anything changes."""

    role: str
    current: int
    target: int
    stateful: bool  # the role's instances keep data on their disks
    options: dict[str, Any] = field(default_factory=dict)  # resolved launch options

    @property
    def grows(self) -> bool:
        return self.target > self.current


@dataclass(frozen=True)
class Load:
    """One reading of a cluster's pending work (autoscaling's signal), in the plugin's unit."""

    pending: float  # asked for and not granted (YARN's pending MB; cores Spark waits for)
    available: float  # capacity granted to no one now, same unit
    per_worker: float  # what one more worker adds, same unit
    unit: str  # "MB", "cores"


def figure(answer: Any, key: str, most: float = 1e9) -> float:
    """A number from a product's answer, which its root users control: a finite number from
    0 to `most`, or ValueError."""
    value = answer.get(key) if isinstance(answer, dict) else None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
        raise ValueError(f"{key} is not a number: {value!r}"[:120])
    return float(min(max(value, 0), most))


@dataclass(frozen=True)
class Member:
    """An active instance of the cluster as a plugin sees it."""

    id: int
    role: str
    index: int
    hostname: str
    ip: str
    container: str


class Operator(Protocol):
    """What the resize operation (workers/resize.py) offers a plugin: node work on members
    and the cluster's events. Errors of a node that does not answer propagate (the runner
    retries them); a command that fails raises ResizeFailed."""

    cluster_id: int
    # How long a drain may take: the autoscaling policy's graceful-decommission timeout when
    # the cluster has one, else RESIZE_DRAIN_SECONDS.
    drain_seconds: int

    def members(self) -> list[Member]: ...  # active instances, by id

    def exec(self, member: Member, argv: list[str], timeout: int = 120) -> tuple[int, str]: ...

    def run(self, member: Member, argv: list[str], timeout: int = 120) -> str: ...

    def event(self, message: str, level: str = "info") -> None: ...

    def container_state(self, member: Member) -> str | None: ...

    def running(self, member: Member) -> bool: ...

    def start(self, member: Member, environment: dict[str, str]) -> None: ...

    def stop(self, members: list[Member]) -> None: ...

    def restart(self, member: Member) -> None: ...

    def remove(self, members: list[Member], keep_data: bool) -> None: ...

    def logs(self, member: Member, lines: int) -> str: ...

    def empty_disks(self, member: Member) -> None: ...

    def prepare(self, ids: set[int]) -> None: ...  # images, network, handed-over disks

    def add_hosts(self, ids: set[int]) -> None: ...

    def configure_again(self) -> None: ...

    def mark_running(self, ids: set[int]) -> None: ...

    def join_together(self, ids: set[int]) -> None: ...  # the default join


class JobLike(Protocol):
    """The fields of a job (apps.jobs.models.Job) a plugin builds commands from."""

    id: int
    kind: str
    main: str
    main_class: str
    args: list
    properties: dict
    py_files: list
    files: list
    application_id: str


@dataclass(frozen=True)
class AppPage:
    """An application's page in a cluster's web UI: ids starting with `prefix` are shown on
    the UI on `port` at `path` ({id} replaced)."""

    prefix: str
    port: int
    path: str


@dataclass(frozen=True)
class UsageProbe:
    """A signal of use: a REST endpoint on `port` inside an instance's container whose JSON
    lists items under the dotted `key`; those matching `which` (field, prefix, negate) count.
    `path` may hold {root} (the UI's root) and {host} (the instance's hostname)."""

    port: int
    path: str
    key: str
    which: tuple[str, str, bool] | None
    words: str


@dataclass(frozen=True)
class NotebookProbe:
    """How to ask a notebook instance whether it answers: argv exits 0 and prints `marker`."""

    role: str
    argv: list[str]
    marker: str
    timeout: int = 10


@runtime_checkable
class ProductPlugin(Protocol):
    name: ClassVar[str]
    title: ClassVar[str]  # for people: "Hadoop (HDFS decommission)"
    job_kinds: ClassVar[tuple[str, ...]]  # Job.Kind values; empty: no Jobs form, no job API
    application_id: ClassVar[re.Pattern | None]  # finds a job's application id in its log
    app_pages: ClassVar[tuple[AppPage, ...]]
    usage_probes: ClassVar[tuple[UsageProbe, ...]]
    notebook_probe: ClassVar[NotebookProbe | None]
    drain_words: ClassVar[str]  # what a user reads while leaving members drain
    memory_live: ClassVar[bool]  # uses a changed memory limit without a restart
    # Autoscaling's reading: (role, argv) run in the first member of the role; None: none.
    load_command: ClassVar[tuple[str, list[str]] | None]

    def resizable_roles(self, roles: dict[str, bool]) -> list[str]: ...

    def resize_refusal(self, ask: ResizeAsk) -> str | None: ...

    def pinned_options(self, chosen: dict[str, Any], resolved: dict[str, Any]) -> dict | None: ...

    def admit(self, op: Operator, added: list[Member]) -> None: ...

    def join(self, op: Operator, ids: set[int]) -> None: ...

    def drain(self, op: Operator, leaving: list[Member]) -> None: ...

    def restarted(self, op: Operator, member: Member) -> None: ...

    def load_of(self, answer: Any) -> Load: ...

    def job_argv(self, job: JobLike, local: Any) -> list[str]: ...

    def job_environment(self, job: JobLike) -> dict[str, str]: ...

    def job_kill_steps(self, job: JobLike) -> list[str]: ...

    def connections(self, options: dict[str, Any]) -> list[str]: ...


class BasePlugin:
    """The defaults, all fail closed: no stateful role resizes, no drain, no jobs, no probes
    beyond open connections (which idle stop reads for every product), no notebook."""

    name: ClassVar[str] = "generic"
    title: ClassVar[str] = "generic"
    job_kinds: ClassVar[tuple[str, ...]] = ()
    application_id: ClassVar[re.Pattern | None] = None
    app_pages: ClassVar[tuple[AppPage, ...]] = ()
    usage_probes: ClassVar[tuple[UsageProbe, ...]] = ()
    notebook_probe: ClassVar[NotebookProbe | None] = None
    drain_words: ClassVar[str] = ""
    # A heap or cache sized at start cannot use more (JVMs, GOMEMLIMIT): a memory change
    # restarts the instances one at a time unless a plugin says its product follows the limit.
    memory_live: ClassVar[bool] = False
    load_command: ClassVar[tuple[str, list[str]] | None] = None
    # Roles whose members may come and go; () with stateless roles only (resizable_roles).
    resizable: ClassVar[tuple[str, ...]] = ()

    def resizable_roles(self, roles: dict[str, bool]) -> list[str]:
        """Of the definition's roles (name: keeps state), those this plugin resizes."""
        if self.resizable:
            return [r for r in roles if r in self.resizable]
        return [r for r, stateful in roles.items() if not stateful]

    def resize_refusal(self, ask: ResizeAsk) -> str | None:
        if ask.role in self.resizable or not ask.stateful:
            return None
        return (
            f"its {ask.role}s keep data on their disks and this version's plugin "
            f"({self.name}) has no way to move it: it cannot be resized"
        )

    def pinned_options(self, chosen: dict[str, Any], resolved: dict[str, Any]) -> dict | None:
        return None

    def admit(self, op: Operator, added: list[Member]) -> None:
        return None

    def join(self, op: Operator, ids: set[int]) -> None:
        op.join_together(ids)

    def drain(self, op: Operator, leaving: list[Member]) -> None:
        stateful = [m for m in leaving if m.role not in self.resizable]
        if stateful:  # the request's refusal is the usual stop; this is the backstop
            raise ResizeFailed(
                f"the {self.name} plugin has no drain for {stateful[0].role}s: they keep state"
            )

    def restarted(self, op: Operator, member: Member) -> None:
        """Return once `member`, just restarted with new cores or memory (a rolling vertical
        resize), is back in the product: by default once the product's checks pass again (a
        grow's). ResizeFailed when it does not come back."""
        op.configure_again()

    def load_of(self, answer: Any) -> Load:
        """The pending work in `answer` (load_command's JSON); ValueError when it holds none."""
        raise ValueError(f"{self.name} reports no pending work")

    def job_argv(self, job: JobLike, local: Any) -> list[str]:
        raise ValueError(f"{self.name} runs no jobs")

    def job_environment(self, job: JobLike) -> dict[str, str]:
        return {}

    def job_kill_steps(self, job: JobLike) -> list[str]:
        return []

    def connections(self, options: dict[str, Any]) -> list[str]:
        return []
