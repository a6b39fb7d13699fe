"""djwork declarations of jobs that run in Ruby Sidekiq (tests/interop/sidekiq_jobs.rb).

``name=`` is the Ruby class, so the payload's ``class`` is a Ruby constant the
Sidekiq server can load. These are enqueue-side stubs: only the test process
imports this module, never a djwork worker (a worker that knew these names
would run the stub instead of leaving the job to Ruby).
"""

from __future__ import annotations

import djwork


def _runs_in_ruby(*args, **kwargs):
    raise RuntimeError("this job runs in Ruby Sidekiq, not in djwork")


interop_ruby_job = djwork.job(name="InteropRubyJob", queue="ruby")(_runs_in_ruby)
ruby_slow_job = djwork.job(name="RubySlowJob", queue="ruby")(_runs_in_ruby)
ruby_fail_job = djwork.job(name="RubyFailJob", queue="ruby")(_runs_in_ruby)
