from django.urls import path

from . import views

app_name = "proxy"

UI = "clusters/<int:cluster_id>/ui/<str:hostname>/<int:port>/"

urlpatterns = [
    path(UI, views.portal_web_ui, name="ui"),
    path(UI + "<path:path>", views.portal_web_ui, name="ui-path"),
    # Where a UI host sends the browser back with its nonce's hash, for a ticket bound to it.
    path("clusters/<int:cluster_id>/ui-ticket", views.issue_ticket, name="ticket"),
]
