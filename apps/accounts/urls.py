from django.urls import path

from . import oidc

# The provider's redirect URI is https://<portal>/accounts/oidc/callback/ (README).
urlpatterns = [
    path("oidc/authenticate/", oidc.authenticate_view, name="oidc_authentication_init"),
    path("oidc/callback/", oidc.callback_view, name="oidc_authentication_callback"),
]
