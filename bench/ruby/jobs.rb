# Sidekiq workers for bench/compare.py: the same bodies as the Python systems' (one INCR; a no-op counted per
# 100 runs; one RPUSH of a latency).
#
#   BENCH_REDIS_URL=redis://127.0.0.1:PORT/0 sidekiq -r ./bench/ruby/jobs.rb -c 10 -q bench
#
# The job bodies use Sidekiq's own connection pool (Sidekiq.redis), as a Sidekiq
# app would. Per-job log lines are off (WARN), as djwork's LOG_JOBS is in bench/settings.py.
require "sidekiq"

# Debian pairs sidekiq 6.4.1 with redis-rb 4.8, which prints a deprecation warning to stderr on
# every BRPOP (positional timeout) and SADD (return type) Sidekiq 6.4 makes: a log write per job
# fetched or pushed. Silenced, as an app would do; Sidekiq's numbers would include it otherwise.
Redis.silence_deprecations = true if Redis.respond_to?(:silence_deprecations=)

Sidekiq.configure_server do |config|
  config.redis = { url: ENV.fetch("BENCH_REDIS_URL") }
end
Sidekiq.configure_client do |config|
  config.redis = { url: ENV.fetch("BENCH_REDIS_URL") }
end
Sidekiq.logger.level = Logger::WARN

class IncrJob
  include Sidekiq::Worker
  sidekiq_options queue: "bench"

  def perform
    Sidekiq.redis { |conn| conn.incr("bench:counter") }
  end
end

# bench/compare.py --job noop: the framework's own cost, the body of bench/others/counter.py's noop: no Redis call
# but one INCRBY per 100 runs of this process (so the drain sees progress).
class NoopJob
  include Sidekiq::Worker
  sidekiq_options queue: "bench"
  @@lock = Mutex.new
  @@count = 0

  def perform
    done = @@lock.synchronize { @@count += 1 }
    Sidekiq.redis { |conn| conn.incrby("bench:counter", 100) } if (done % 100).zero?
  end
end

class ProbeJob
  include Sidekiq::Worker
  sidekiq_options queue: "bench"

  def perform(sent_at)
    started = Time.now.to_f
    Sidekiq.redis { |conn| conn.rpush("bench:latency", started - sent_at) }
  end
end

# bench/async_jobs.py --sidekiq: an I/O-bound job (a sleep standing in for the wait), counted per 100 runs as the
# djwork job is.
class SleepJob
  include Sidekiq::Worker
  sidekiq_options queue: "bench"
  @@lock = Mutex.new
  @@count = 0

  def perform(seconds)
    sleep(seconds)
    done = @@lock.synchronize { @@count += 1 }
    Sidekiq.redis { |conn| conn.incrby("bench:counter", 100) } if (done % 100).zero?
  end
end
