"""What djwork.api raises (defined in djwork.exceptions, a leaf module the enqueue path can import too)."""

from djwork.exceptions import ApiError, EmbeddedProcess, NotRetryable, RedisUnavailable, StaleEntry

__all__ = ["ApiError", "EmbeddedProcess", "NotRetryable", "RedisUnavailable", "StaleEntry"]
