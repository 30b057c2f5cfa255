from django.http import HttpRequest, HttpResponse
from django.shortcuts import render


def home(request: HttpRequest) -> HttpResponse:
    """The landing page; the self-service pages hang off it as they arrive."""
    return render(request, "home.html")
