"""The API's paginator reads no COUNT when the page tells it (a page that is not full), and
answers every other page as Django's does."""

import pytest
from django.core.paginator import EmptyPage, PageNotAnInteger
from django.db import connection
from django.test.utils import CaptureQueriesContext

from apps.api.pagination import Paginator
from apps.tokens.models import ApiToken
from apps.tokens.services import issue_token

pytestmark = pytest.mark.django_db


@pytest.fixture
def five(alice):
    for n in range(5):
        issue_token(alice, f"t{n}")
    return ApiToken.objects.order_by("id")


def page_of(rows, size: int, number):
    """The page, its count and whether anything asked the database for a COUNT."""
    with CaptureQueriesContext(connection) as captured:
        page = Paginator(rows, size).page(number)
        count = page.paginator.count
    counted = any("COUNT(" in q["sql"] for q in captured.captured_queries)
    return page, count, counted, len(captured.captured_queries)


def test_a_page_that_is_not_full_tells_the_count(five):
    page, count, counted, queries = page_of(five, 2, "3")
    assert [t.name for t in page] == ["t4"] and count == 5 and not counted and queries == 1
    assert page.has_previous() and not page.has_next()
    page, count, counted, queries = page_of(five, 10, 1)
    assert len(page) == 5 and count == 5 and not counted and queries == 1


def test_a_full_page_counts(five):
    page, count, counted, queries = page_of(five, 2, 2)
    assert [t.name for t in page] == ["t2", "t3"] and count == 5 and counted and queries == 2
    assert page.has_next()


def test_an_empty_first_page_is_one_query(db):
    page, count, counted, _ = page_of(ApiToken.objects.order_by("id"), 2, 1)
    assert len(page) == 0 and count == 0 and not counted


@pytest.mark.parametrize("number", [4, 10**20])
def test_pages_past_the_end_are_djangos_error(five, number):
    with pytest.raises(EmptyPage):
        Paginator(five, 2).page(number)


@pytest.mark.parametrize("number", ["x", "1.5", None])
def test_pages_that_are_no_number_are_djangos_error(five, number):
    with pytest.raises(PageNotAnInteger):
        Paginator(five, 2).page(number)
