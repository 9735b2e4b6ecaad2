"""Helpers shared by several test layers."""
