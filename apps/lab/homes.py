"""Which lab, which checkout's, a process, a run folder or a network link belongs to: what
`lab up` names when something holds what it needs (clash.py) and when another lab routes a
segment's subnet (segments.py)."""

import re
from itertools import pairwise
from pathlib import Path

from . import host
from .nodes import RUN_ROOT, LabSpec

HOME_FILE = "home"  # in a lab's run folder: the lab's home, so others can name it


def mark_home(spec: LabSpec) -> None:
    spec.run_dir.mkdir(parents=True, exist_ok=True)
    (spec.run_dir / HOME_FILE).write_text(f"{spec.home}\n")


def where(home: Path) -> str:
    """A checkout's lab lives in <checkout>/.local/lab: name the checkout, else the folder."""
    return str(home.parent.parent if home.parent.name == ".local" else home)


def home_of(pid: int) -> Path | None:
    """The home of the lab a process belongs to, read from its command line."""
    found = host.process(pid)
    words = found.command.split() if found else []
    for flag, value in pairwise(words):
        if flag == "--data-root" and "/nodes/" in value:  # <home>/nodes/<node>/docker
            return Path(value.rsplit("/nodes/", 1)[0])
        if flag == "-f" and value.endswith("/ssh/sshd_config"):  # the lab's sshd
            return Path(value).parent.parent
    for word in words:  # containerd, shims, ssh masters: a path in the lab's run folder
        if word.startswith(f"{RUN_ROOT}/"):
            return home_of_run_dir(RUN_ROOT / Path(word).relative_to(RUN_ROOT).parts[0])
    return None


def home_of_run_dir(run_dir: Path) -> Path | None:
    try:
        return Path((run_dir / HOME_FILE).read_text().strip())
    except OSError:  # a lab from before the file existed: ask its daemons
        pass
    for process in host.processes_of([run_dir]):
        words = process.command.split()
        if "--data-root" in words:
            return home_of(process.pid)
    return None


def lab_of_link(name: str) -> str | None:
    """Where the lab that made this link lives (its names carry the lab's key)."""
    if re.fullmatch(r"plab[0-9a-f]{8}", name):
        keys = [name.removeprefix("plab")]
    elif re.fullmatch(r"pl[0-9a-f]{6}[sh]\d\d", name):  # a segment's bridge or shim
        keys = [d.name for d in RUN_ROOT.glob(f"{name[2:8]}*")] or [name[2:8]]
    else:
        return None
    for key in keys:
        home = home_of_run_dir(RUN_ROOT / key)
        if home is not None:
            return where(home)
    return "another lab on this machine (it left no run folder)"
