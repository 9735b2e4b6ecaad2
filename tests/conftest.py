"""Fixtures shared by every test layer."""

pytest_plugins = ["tests.google_fixtures", "tests.mutation_kills"]
