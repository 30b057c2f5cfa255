from django.urls import path

from . import views

app_name = "proxy"

UI = "clusters/<int:cluster_id>/ui/<str:hostname>/<int:port>/"

urlpatterns = [
    path(UI, views.portal_web_ui, name="ui"),
    path(UI + "<path:path>", views.portal_web_ui, name="ui-path"),
]
