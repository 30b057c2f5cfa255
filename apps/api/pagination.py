from django.core.paginator import Page
from django.core.paginator import Paginator as DjangoPaginator
from rest_framework.pagination import PageNumberPagination

MAX_OFFSET = 2**31


class Paginator(DjangoPaginator):
    """Django's, without the COUNT query when the page itself tells the count: a page that is
    not full (a user's dozen clusters on page 1, or the last page) holds the last rows, so the
    count is the rows before it plus its own (issue 34: one query fewer on most lists).
    A full page, or an empty one past the first, still counts as Django does."""

    def page(self, number) -> Page:
        if self.orphans or "count" in self.__dict__:
            return super().page(number)
        try:
            number = self.validate_number_below_count(number)
        except (TypeError, ValueError):
            return super().page(number)  # Django's own error for it
        bottom = (number - 1) * self.per_page
        if bottom > MAX_OFFSET:  # no list is that long, and PostgreSQL refuses past a bigint
            return super().page(number)  # Django's count, and its error
        rows = list(self.object_list[bottom : bottom + self.per_page])
        if not rows and number > 1:
            return super().page(number)  # past the end: Django's count and error
        if len(rows) < self.per_page:
            self.__dict__["count"] = bottom + len(rows)  # the cached_property, known now
        return Page(rows, self.validate_number(number), self)

    @staticmethod
    def validate_number_below_count(number) -> int:
        """Django's checks of a page number that need no count: a whole number from 1."""
        if isinstance(number, float) and not number.is_integer():
            raise ValueError(number)
        number = int(number)
        if number < 1:
            raise ValueError(number)
        return number


class Pagination(PageNumberPagination):
    """``?page=N&page_size=M``; answers {count, next, previous, results}."""

    django_paginator_class = Paginator
    page_size_query_param = "page_size"
    max_page_size = 500
