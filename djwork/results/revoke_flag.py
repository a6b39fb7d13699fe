"""``djwork.revoked(jid)``: whether a job is revoked now (docs/celery.md, Revoke).

Apart from djwork/results/revoke.py so that ``self.request.is_revoked()`` (djwork/jobs/task_class.py) can read
the flag without importing the revoke step, which imports the request class for its ``task_revoked``.
"""

from __future__ import annotations

import time

from djwork import redis as redis_layer
from djwork.redis import keys


def revoked(jid: str) -> bool:
    """Whether ``jid`` is revoked now (a running job asks this to stop early)."""
    until = redis_layer.run(lambda conn: conn.zscore(keys.REVOKED, jid), idempotent=True)
    return until is not None and until > time.time()
