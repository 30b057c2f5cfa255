import pytest
from django.contrib.auth import authenticate
from django.core.management import call_command

from apps.accounts.models import Quota
from apps.catalog.models import ProductVersion


@pytest.mark.django_db
def test_it_creates_the_printed_logins_a_quota_and_the_catalog():
    call_command("seed_demo")
    call_command("seed_demo")  # idempotent: a second run changes nothing and does not fail
    admin = authenticate(username="admin", password="admin-platter")
    demo = authenticate(username="demo", password="demo-platter")
    assert admin is not None and admin.is_superuser
    assert demo is not None and not demo.is_staff
    assert Quota.objects.get(user=demo).max_clusters == 4
    assert ProductVersion.objects.filter(product__name="demo").exists()
