"""What of a lab the machine still holds, read with the system's own tools (ps, /proc/mounts,
losetup, ip link), never from the lab's records: shared by the tests that take labs down."""

import subprocess
from pathlib import Path

from apps.lab import ssh
from apps.lab.nodes import LabSpec


def machine_holds(spec: LabSpec) -> list[str]:
    """Everything of the lab the machine holds, by its own tools: processes naming the lab's
    folders (and containers, which carry the lab's key in their command), mounts, loop devices,
    links with the lab's key, the ssh client's Include line."""
    folders = [str(spec.home), str(spec.run_dir)]
    ps = subprocess.run(["ps", "-eww", "-o", "pid=,args="], capture_output=True, text=True)
    held = [
        f"process {line.strip()}"
        for line in ps.stdout.splitlines()
        if any(folder in line for folder in folders) or f"tinylab-{spec.key}" in line
    ]
    mounts = Path("/proc/mounts").read_text().splitlines()
    held += [f"mount {line}" for line in mounts if any(f in line for f in folders)]
    loops = subprocess.run(["losetup", "-a"], capture_output=True, text=True).stdout
    held += [f"loop {line}" for line in loops.splitlines() if str(spec.home) in line]
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    held += [f"link {line[:60]}" for line in links.splitlines() if spec.key[:6] in line]
    config = ssh.user_ssh_config()
    if config.exists():
        lines = config.read_text().splitlines()
        held += [f"ssh config {line}" for line in lines if spec.key in line]
    return held
