"""A user's SSH keys changed: rewrite authorized_keys in the sshd instance of each of their live
clusters (the image's platter-ssh-keys), so a key added or removed applies at once.

Clusters that are not running get the keys when their containers are made or replaced (the
keys are in the container's environment, apps.clusters.access.ssh_environment)."""

import logging

from apps import nodes
from apps.accounts import ssh_sync
from apps.accounts.ssh import authorized_keys
from apps.clusters import access, container_specs
from apps.clusters.models import Cluster
from apps.nodes import NodeError
from portal import locks

log = logging.getLogger(__name__)
KEYS_COMMAND = "/opt/platter/bin/platter-ssh-keys"
# States whose containers exist and run (configuring: the product is still starting).
LIVE = [Cluster.State.CONFIGURING, Cluster.State.RUNNING, Cluster.State.DEGRADED]
EXEC_SECONDS = 30
# A change that commits while an exec writes the keys is written again at once (the run that
# change queued would write it too, a little later).
MAX_ROUNDS = 5
RUNNING_RETRY_SECONDS = 5  # a run queued while another of the user runs waits this long


def sync(user_id: int) -> dict[str, list[int]] | None:
    """One coalesced run (apps.accounts.ssh_sync): push_keys under the user's lock, or None
    when another run of this user holds it (the task tries again shortly; changes meanwhile
    join this pending run)."""
    with locks.advisory_lock(locks.SSH_KEYS, user_id) as got:
        if not got:
            return None
        ssh_sync.starting(user_id)  # from here on, a change queues one more run
        return push_keys(user_id)


def push_keys(user_id: int) -> dict[str, list[int]]:
    """{"updated": [cluster ids], "failed": [cluster ids]} of the user's live clusters."""
    report: dict[str, list[int]] = {"updated": [], "failed": []}
    clusters = Cluster.objects.filter(owner_id=user_id, state__in=LIVE).select_related("version")
    for cluster in clusters.order_by("id"):
        instance = access.ssh_instance(cluster)
        if instance is None or instance.node is None:
            continue
        name = instance.container_id or container_specs.container_name(
            cluster.id, instance.role, instance.index
        )
        try:
            _write_until_current(user_id, instance.node, name)
        except (NodeError, TimeoutError, RuntimeError) as error:
            # The next change, or the container's next creation, brings the keys.
            log.warning("ssh keys of cluster %s not updated: %s", cluster.id, error)
            report["failed"].append(cluster.id)
        else:
            report["updated"].append(cluster.id)
    return report


def _write_until_current(user_id: int, node, container: str) -> None:
    keys = authorized_keys(user_id)
    for _round in range(MAX_ROUNDS):
        code, output = nodes.client(node).exec(container, [KEYS_COMMAND, *keys], EXEC_SECONDS)
        if code != 0:
            raise RuntimeError(f"{KEYS_COMMAND} exited {code}: {output.strip()[-300:]}")
        current = authorized_keys(user_id)
        if current == keys:
            return
        keys = current
    raise RuntimeError(f"the keys kept changing over {MAX_ROUNDS} writes")
