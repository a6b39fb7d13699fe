"""What djwork refuses on a Redis Cluster, at the call, never as a CROSSSLOT later.

docs/cluster.md, Refused on a cluster. Against the real 3+3 cluster, reached through one node.
"""

from __future__ import annotations

from django.conf import settings
from django.test import override_settings

import djwork
from djwork.redis import key_layout, keys
from djwork.settings.conf import get_config
from djwork.worker import mode
from tests import cluster_jobs


def test_a_push_with_a_priority_is_accepted_into_its_lane_in_its_queues_slot(on_cluster):
    # A lane carries its queue's hash tag on a cluster (docs/priority.md): no longer refused, never a CROSSSLOT.
    assert cluster_jobs.record.apply_async(("urgent",), priority=3).enqueued
    conn = on_cluster.cluster_client()
    assert conn.llen(key_layout.CLUSTER.lane("default", -3)) == 1
    assert conn.smembers(key_layout.CLUSTER.lanes("default")) == {b"-3"}
    assert conn.keyslot(key_layout.CLUSTER.lane("default", -3)) == conn.keyslot(keys.queue("default"))


def test_a_batch_is_accepted_its_keys_in_its_slot_and_its_job_queued(on_cluster):
    # Its steps are split on a cluster (tests/test_cluster_batches.py runs them): no longer refused.
    batch = djwork.Batch(description="on a cluster")
    with batch.jobs():
        cluster_jobs.record.delay("in a batch")
    conn = on_cluster.cluster_client()
    assert conn.llen(keys.queue("default")) == 1
    assert conn.scard(key_layout.CLUSTER.batch(batch.bid).jids) == 1
    assert conn.hget(keys.batch(batch.bid), "written") == b"1"


def test_a_plain_push_and_one_storing_its_result_or_unique_or_limited_are_not_refused(on_cluster):
    assert cluster_jobs.record.delay("plain").enqueued
    assert cluster_jobs.two_at_a_time.delay("limited", 0).enqueued
    assert cluster_jobs.record.set(ignore_result=False).delay("with a result").enqueued
    assert cluster_jobs.record.set(unique_for=60).delay("unique").enqueued
    assert cluster_jobs.record.apply_async(("Celery's default priority",), priority=0).enqueued  # no lane


def test_a_worker_storing_every_result_starts_on_a_cluster(on_cluster):
    with override_settings(DJWORK={**settings.DJWORK, "RESULTS": True}):
        assert mode.mode_for(get_config()) is mode.CLUSTER


def test_one_server_keeps_its_single_step_worker(redis):
    assert mode.mode_for(get_config()) is mode.SINGLE_SERVER

