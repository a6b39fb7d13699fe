"""Helpers for testing djwork (and projects using it) against a real, private redis-server."""
