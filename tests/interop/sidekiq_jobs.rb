# Loaded by the `sidekiq` CLI (`sidekiq -r tests/interop/sidekiq_jobs.rb`): the Ruby job classes a
# djwork enqueuer names in its payloads' "class" (djwork jobs declared with name="InteropRubyJob" ...).
#
# Every job writes what it did to Redis under t:ruby:* so the Python test can count runs exactly.
require_relative "boot"

# Poll `schedule` and `retry` about every second (0.5-1.5 s) from the start; the default is
# 5 s x number of processes, after a 10 s initial wait.
Sidekiq.configure_server { |config| Interop.set_option(config, :poll_interval_average, 1) }

module Interop
  def self.record(counts_key, key, fact)
    Sidekiq.redis do |conn|
      conn.multi do |tx|
        tx.hincrby(counts_key, key.to_s, 1)
        tx.lpush("t:ruby:log", JSON.generate(fact.merge("pid" => ::Process.pid, "time" => Time.now.to_f)))
      end
    end
  end
end

# What djwork's InteropRubyJob payloads run as.
class InteropRubyJob
  include Sidekiq::Worker

  def perform(key, *rest)
    Interop.record("t:ruby:counts", key, "class" => self.class.name, "jid" => jid, "args" => [key, *rest])
  end
end

# Holds a processor thread (busy) until `t:ruby:release` exists or `seconds` passed.
class RubySlowJob
  include Sidekiq::Worker

  def perform(key, seconds)
    Sidekiq.redis { |conn| conn.hincrby("t:ruby:starts", key.to_s, 1) }
    deadline = Time.now + seconds.to_f
    until Time.now >= deadline
      # GET, not EXISTS?: redis-client (Sidekiq 7) has no `exists?`, and redis-rb's `exists` warns.
      break if Sidekiq.redis { |conn| conn.get("t:ruby:release") }
      sleep 0.1
    end
    Interop.record("t:ruby:counts", key, "class" => self.class.name, "jid" => jid, "args" => [key, seconds])
  end
end

# Always raises: Sidekiq's own retry/dead path, for djwork's reader to show.
class RubyFailJob
  include Sidekiq::Worker

  def perform(key)
    Sidekiq.redis { |conn| conn.hincrby("t:ruby:fails", key.to_s, 1) }
    raise ArgumentError, "RubyFailJob #{key} fails"
  end
end

# The Ruby half of the mixed fleet (queue shared with a djwork process).
class MixedRubyJob
  include Sidekiq::Worker

  def perform(key)
    Sidekiq.redis { |conn| conn.hincrby("t:mixed:ruby", key.to_s, 1) }
  end
end

# Server middleware: a MixedRubyJob that arrives with an error_class failed somewhere else first
# (djwork's UnknownJobClass), which shows the test that the retry path carried it here.
class InteropBounceRecorder
  def call(_worker, job, _queue)
    if job["class"] == "MixedRubyJob" && job["error_class"]
      Sidekiq.redis do |conn|
        conn.hset("t:mixed:ruby:bounced", job["args"][0].to_s, job["error_class"])
        conn.hset("t:mixed:ruby:tries", job["args"][0].to_s, job["retry_count"].to_i + 1)
      end
    end
    yield
  end
end

Sidekiq.configure_server do |config|
  config.server_middleware { |chain| chain.add InteropBounceRecorder }
end

# INTEROP_CAPSULE=name:queue:concurrency adds a Sidekiq 7 capsule with its own threads on one queue
# (tests/interop/helpers.py, RubyFleet.sidekiq(capsule=...)); 6.x has no capsules and refuses it.
if (spec = ENV["INTEROP_CAPSULE"]) && Sidekiq.server?
  abort("INTEROP_CAPSULE needs Sidekiq 7 (capsules), this is #{Sidekiq::VERSION}") unless Interop.sidekiq7?
  name, queue, concurrency = spec.split(":")
  Sidekiq.configure_server do |config|
    config.capsule(name) do |capsule|
      capsule.concurrency = Integer(concurrency)
      capsule.queues = [queue]
    end
  end
end
