"""How a cluster's owner gets in: what each instance's container is told at create time (SSH
keys, the cluster's credentials, the path its web UIs are served under by the portal), and what
the cluster page and the APIs show (the ssh command, the proxied web UIs).

Each part lives with its domain (apps/accounts for keys, apps/clusters/credentials for
secrets, apps/proxy for web UIs); this module is the one place the container plan and the
connection selector ask.
"""

from apps.clusters.models import Cluster, Instance


def instance_environment(cluster: Cluster, instance: Instance) -> dict[str, str]:
    """Extra PLATTER_* variables for an instance's container."""
    return {
        **ssh_environment(cluster, instance),
        **credential_environment(cluster, instance),
        **web_ui_environment(cluster, instance),
    }


def ssh_environment(cluster: Cluster, instance: Instance) -> dict[str, str]:
    return {}


def credential_environment(cluster: Cluster, instance: Instance) -> dict[str, str]:
    return {}


def web_ui_environment(cluster: Cluster, instance: Instance) -> dict[str, str]:
    """PLATTER_WEB_UI_ROOT: where the portal serves this cluster's UIs (a path, or a URL on
    PROXY_ORIGIN); a UI at <root>/<hostname>/<port>/ can write its links under it (Spark's
    reverse proxy URL)."""
    from apps.proxy.services import cluster_root_url

    return {"PLATTER_WEB_UI_ROOT": cluster_root_url(cluster.id)}


def ssh_login(cluster: Cluster) -> dict | None:
    """{"command": "ssh …", "user", "address", "port", "hostname"} or None."""
    return None


def web_uis(cluster: Cluster) -> list[dict]:
    """[{"name", "hostname", "port", "url"}]: the portal paths of the cluster's web UIs."""
    from apps.proxy import services

    return services.web_uis(cluster)
