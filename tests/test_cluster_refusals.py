"""What djwork refuses on a Redis Cluster, at the call or at a worker's start, never as a CROSSSLOT later.

docs/cluster.md, Refused on a cluster. Against the real 3+3 cluster, reached through one node.
"""

from __future__ import annotations

import pytest
from django.conf import settings
from django.test import override_settings

import djwork
from djwork.settings.conf import get_config
from djwork.worker import mode
from tests import cluster_jobs, limiter_jobs


def _nothing_written(cluster) -> bool:
    return all(cluster.client(port).dbsize() == 0 for port in cluster.primary_ports())


@pytest.mark.parametrize("enqueue", [
    lambda: limiter_jobs.concurrent_job.delay("limited", 0),
    lambda: cluster_jobs.record.apply_async(("urgent",), priority=3),
], ids=["limiter", "priority"])
def test_a_push_asking_for_a_feature_a_cluster_cannot_run_is_refused_before_anything_is_written(on_cluster,
                                                                                              enqueue):
    with pytest.raises(djwork.ClusterUnsupported, match="Redis Cluster"):
        enqueue()
    assert _nothing_written(on_cluster)


def test_a_batch_is_refused_at_its_first_push(on_cluster):
    batch = djwork.Batch(description="on a cluster")
    with pytest.raises(djwork.ClusterUnsupported, match="a batch"), batch.jobs():
        cluster_jobs.record.delay("in a batch")
    assert _nothing_written(on_cluster)


def test_a_revoke_is_refused_at_the_call(on_cluster):
    with pytest.raises(djwork.ClusterUnsupported, match="revok"):
        djwork.revoke("a" * 24)
    assert _nothing_written(on_cluster)


def test_a_plain_push_and_one_storing_its_result_or_unique_are_not_refused(on_cluster):
    assert cluster_jobs.record.delay("plain").enqueued
    assert cluster_jobs.record.set(ignore_result=False).delay("with a result").enqueued
    assert cluster_jobs.record.set(unique_for=60).delay("unique").enqueued
    assert cluster_jobs.record.apply_async(("Celery's default priority",), priority=0).enqueued  # no lane


def test_a_worker_storing_every_result_starts_on_a_cluster(on_cluster):
    with override_settings(DJWORK={**settings.DJWORK, "RESULTS": True}):
        assert mode.mode_for(get_config()) is mode.CLUSTER


def test_a_worker_configured_with_what_a_cluster_cannot_run_refuses_to_start(on_cluster):
    entry = {"name": "nightly", "job": "tests.cluster_jobs.noop", "cron": "0 3 * * *", "overlap": False}
    with override_settings(DJWORK={**settings.DJWORK, "PERIODIC": [entry]}), pytest.raises(
            djwork.ClusterUnsupported, match="nightly"):
        mode.mode_for(get_config())


def test_one_server_keeps_its_single_step_worker(redis):
    assert mode.mode_for(get_config()) is mode.SINGLE_SERVER
