"""Jobs for tests/test_outage_logs.py: they touch no Redis, so a stopped server changes nothing inside them."""

from __future__ import annotations

import time

import djwork


@djwork.job
def nap(seconds):
    time.sleep(seconds)
