from django.contrib import admin
from django.urls import include, path

from portal import views

urlpatterns = [
    path("admin/", admin.site.urls),
    path("accounts/", include("django.contrib.auth.urls")),
    path("", views.home, name="home"),
    path("", include("apps.health.urls")),
]
