"""A cluster's web UIs and the portal path each is served under. A UI is a port the catalog
version declares with "ui": true, on a placed instance of that port's role.

The proxy (apps/proxy) serves them under cluster_root_path (its urls.py routes that path) and
forwards to the members; the containers are told the path at create time and the cluster page
and the APIs list the UIs, both through access.py.
"""

from .models import Cluster, Instance


def cluster_root_path(cluster_id: int) -> str:
    return f"/clusters/{cluster_id}/ui"


def ui_ports(cluster: Cluster) -> list[dict]:
    """The version's ports declared as web UIs."""
    return [p for p in cluster.definition.ports or [] if p.get("ui") is True]


def token_roles(cluster: Cluster) -> set[str]:
    """The roles serving a UI that requires the cluster's UI token (the port's "token")."""
    return {p["role"] for p in ui_ports(cluster) if p.get("token") is True}


def live_instances(cluster: Cluster) -> list[Instance]:
    return list(
        cluster.instances.filter(active=True, address__isnull=False)
        .select_related("address__network")
        .order_by("role", "index")
    )


def web_uis(cluster: Cluster) -> list[dict]:
    """[{"name", "hostname", "port", "url"}] of every UI of the cluster's placed members. The
    url is the UI's path on the portal, which checks access and sends the browser on to the
    cluster's own UI origin (apps/proxy/views.py portal_web_ui)."""
    ports = ui_ports(cluster)
    if not ports:
        return []
    root = cluster_root_path(cluster.id)
    return [
        {
            "name": port["name"],
            "hostname": instance.hostname,
            "port": port["port"],
            "url": f"{root}/{instance.hostname}/{port['port']}/",
        }
        for instance in live_instances(cluster)
        for port in ports
        if port["role"] == instance.role
    ]
