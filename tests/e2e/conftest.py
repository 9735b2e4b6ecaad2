"""Fixtures of the end-to-end tests: the headless browser of the browser tests."""

from tests.e2e.browser import browser

__all__ = ["browser"]
