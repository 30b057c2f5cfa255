"""Shared pytest fixtures: personas used across the apps' tests."""

import pytest
from django.contrib.auth import get_user_model


@pytest.fixture
def alice(db):
    """The owner in most tests."""
    return get_user_model().objects.create_user("alice", "alice@example.org", "alice-pass-123")


@pytest.fixture
def bob(db):
    """Another user, who must never see alice's things."""
    return get_user_model().objects.create_user("bob", "bob@example.org", "bob-pass-123")


@pytest.fixture
def admin_user(db):
    return get_user_model().objects.create_superuser("admin", "admin@example.org", "admin-pass-123")
