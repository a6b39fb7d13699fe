"""Helpers for testing djwork and projects using it.

``fake()`` and ``inline()`` (djwork.testing.modes; docs/testing.md) test your
jobs without a worker or Redis; ``djwork.testing.pytest_plugin`` gives pytest
the ``djwork_jobs`` fixture. ``redis_server`` and ``sentinel`` start a real,
private redis-server for djwork's own suite.
"""

from __future__ import annotations

from typing import Any

__all__ = ["FakeJob", "FakeJobs", "fake", "inline"]


def __getattr__(name: str) -> Any:
    # Lazy: djwork.testing.redis_server is imported by conftest files before Django is configured,
    # and the modes need djwork's settings.
    if name in __all__:
        from djwork.testing import modes

        return getattr(modes, name)
    raise AttributeError(f"module 'djwork.testing' has no attribute {name!r}")
