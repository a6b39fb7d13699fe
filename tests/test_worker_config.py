"""A worker's own config (command-line overrides included) sizes its Redis pools."""

from djwork import redis as redis_layer
from djwork.settings.conf import build_config
from djwork.worker.launcher import Launcher


def test_launcher_pools_follow_its_concurrency_override(raw_redis):
    config = build_config({"CONCURRENCY": 60, "QUEUES": ["a", "b"]})
    Launcher(config)
    layer = redis_layer.get_layer()
    assert layer.config is config
    assert layer.pool_size("default") >= 60
    assert layer.pool_size("fetch") >= 60 + 2
    redis_layer.reset()
    assert redis_layer.get_layer().pool_size("default") < 60
