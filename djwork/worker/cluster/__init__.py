"""The worker's steps on a Redis Cluster, where a script may touch one hash slot (docs/cluster.md).

Each module is the cluster's variant of one concern of the worker, chosen once at start by the mode
(djwork/worker/mode.py), never by a test in the code that runs on one server: the fetch and its
acks (``fetch.py``), the queue takers (``taker.py``), filing a failure (``filing.py``), orphan recovery
(``recovery.py``), the scheduled/retry promotion (``promotion.py``) and a revoked job's drop (``revoked.py``).
"""
