"""A job's application in its cluster's own web UI, reached through the portal's UI proxy
(apps.proxy): the link is the UI's path on the portal, which checks access and sends the
browser on to the cluster's UI origin, as the cluster page's links to its web UIs do."""

from apps.clusters import access
from apps.clusters.models import Cluster
from apps.products.registry import plugin_for

from .models import Job


def application_url(job: Job, web_uis: list[dict] | None = None) -> str | None:
    """The portal path of the job's application's page in its cluster's web UI; None with no
    application id (yet), or when the cluster does not serve that UI now (not running, or its
    version declares no such port). `web_uis`: the cluster's (access.web_uis), if at hand."""
    # The version's plugin says which web UI (a port the version declares with "ui": true)
    # shows an application with this form of id, and its page there.
    pages = plugin_for(job.cluster.definition).app_pages
    page = next(
        ((p.port, p.path) for p in pages if job.application_id.startswith(p.prefix)),
        None,
    )
    if page is None or job.cluster.state != Cluster.State.RUNNING:
        return None
    port, path = page
    uis = access.web_uis(job.cluster) if web_uis is None else web_uis
    ui = next((u for u in uis if u["port"] == port), None)
    # The id is letters, digits, "_" and "-" (the plugins' application_id): nothing to escape.
    return None if ui is None else ui["url"] + path.format(id=job.application_id)
