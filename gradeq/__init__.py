"""Gradeq's Python client: `from gradeq.client import GradeqClient`."""
