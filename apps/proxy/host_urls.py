"""The whole URLconf of a UI host (cN.<UI_DOMAIN>): the ticket exchange and the cluster's UIs."""

from django.urls import path

from . import tickets, views

UI = "clusters/<int:cluster_id>/ui/<str:hostname>/<int:port>/"

urlpatterns = [
    path(tickets.BIND_PATH.lstrip("/"), views.bind_browser, name="bind"),
    path(tickets.TICKET_PATH.lstrip("/"), views.redeem_ticket, name="ticket"),
    path(UI, views.ui_host_web_ui, name="ui"),
    path(UI + "<path:path>", views.ui_host_web_ui, name="ui-path"),
]
