import json

from example import tasks


def test_delay_writes_sidekiq_payload(raw_redis):
    ref = tasks.add.delay(1, 2)
    raw = raw_redis.lrange("queue:default", 0, -1)
    assert len(raw) == 1
    job = json.loads(raw[0])
    assert job["jid"] == ref.jid
    assert job["class"] == "example.tasks.add"
    assert job["args"] == [1, 2]
    assert raw_redis.smembers("queues") == {b"default"}
