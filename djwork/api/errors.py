"""What djwork.api raises (defined in djwork.errors, a leaf module the enqueue path can import too)."""

from djwork.errors import ApiError, EmbeddedProcess, NotRetryable, RedisUnavailable, StaleEntry

__all__ = ["ApiError", "EmbeddedProcess", "NotRetryable", "RedisUnavailable", "StaleEntry"]
