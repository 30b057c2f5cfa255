"""How a cluster's owner gets in: what each instance's container is told at create time (SSH
keys, the cluster's credentials, the path its web UIs are served under by the portal), and what
the cluster page and the APIs show (the ssh command, the proxied web UIs).

Each part lives with its domain (apps/accounts for keys, apps/clusters/credentials.py for
secrets, apps/clusters/web_ui.py for the web UIs apps/proxy serves); this module is the one
place the container plan and the connection selector ask.
"""

from apps.clusters import credentials, web_ui
from apps.clusters.models import Cluster, Instance


def instance_environment(cluster: Cluster, instance: Instance) -> dict[str, str]:
    """Extra PLATTER_* variables for an instance's container."""
    return {
        **ssh_environment(cluster, instance),
        **credential_environment(cluster, instance),
        **web_ui_environment(cluster, instance),
    }


def ssh_environment(cluster: Cluster, instance: Instance) -> dict[str, str]:
    """PLATTER_SSH_AUTHORIZED_KEYS (the owner's public keys, one per line; maybe none) for the
    instance that runs sshd: its start script (platter-sshd) starts sshd when it is set. Keys
    changed later reach the running container through workers/ssh_keys.py."""
    if ssh_instance(cluster) != instance:
        return {}
    from apps.accounts.ssh import authorized_keys

    return {SSH_KEYS_VARIABLE: "\n".join(authorized_keys(cluster.owner_id))}


def credential_environment(cluster: Cluster, instance: Instance) -> dict[str, str]:
    """The cluster's login and shared secret (PLATTER_AUTH_*), made at its first placement."""
    return credentials.environment(credentials.ensure_credentials(cluster))


def web_ui_environment(cluster: Cluster, instance: Instance) -> dict[str, str]:
    """PLATTER_WEB_UI_ROOT: the path the portal serves this cluster's UIs under (the same on
    the portal and on the cluster's UI host); a UI at <root>/<hostname>/<port>/ can write its
    links under it (Spark's reverse proxy URL). PLATTER_UI_TOKEN for an instance serving a UI
    that requires it (JupyterLab), and for no other: the proxy sends it upstream."""
    found = {"PLATTER_WEB_UI_ROOT": web_ui.cluster_root_path(cluster.id)}
    if instance.role in web_ui.token_roles(cluster):
        found.update(credentials.ui_token_environment(credentials.ensure_credentials(cluster)))
    return found


SSH_KEYS_VARIABLE = "PLATTER_SSH_AUTHORIZED_KEYS"


def ssh_port(version) -> dict | None:
    """The catalog's way in of a version: its port of scheme "ssh" (role and port number).
    The login user is the one that role's product runs as (the role's "user", else root)."""
    return next((p for p in version.ports or [] if p.get("scheme") == "ssh"), None)


def ssh_instance(cluster: Cluster) -> Instance | None:
    """The active instance that runs sshd: the first of the ssh port's role."""
    port = ssh_port(cluster.definition)
    if port is None:
        return None
    return (
        cluster.instances.filter(active=True, role=port["role"])
        .select_related("node", "address")
        .order_by("index")
        .first()
    )


def ssh_login(cluster: Cluster) -> dict | None:
    """{"command": "ssh …", "user", "address", "port", "hostname"} or None (no sshd in this
    product, or no instance placed)."""
    port = ssh_port(cluster.definition)
    instance = ssh_instance(cluster) if port else None
    if port is None or instance is None or instance.address is None:
        return None
    role: dict = next((r for r in cluster.definition.roles if r.get("name") == port["role"]), {})
    user = role.get("user") or "root"
    address = instance.address.ip
    target = f"{user}@{address}" if port["port"] == 22 else f"-p {port['port']} {user}@{address}"
    return {
        "command": f"ssh -i <your key> {target}",
        "user": user,
        "address": address,
        "port": port["port"],
        "hostname": instance.hostname,
    }


def web_uis(cluster: Cluster) -> list[dict]:
    """[{"name", "hostname", "port", "url"}]: the portal paths of the cluster's web UIs; each
    sends the browser, after the portal's access check, to the cluster's own UI origin."""
    return web_ui.web_uis(cluster)
