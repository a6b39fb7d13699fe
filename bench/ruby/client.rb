# Client side of bench/compare.py for Sidekiq: enqueue and time it, or push latency probes.
#
#   BENCH_REDIS_URL=... ruby bench/ruby/client.rb ACTION COUNT [BATCH] [RATE] [JOB]
#
# ACTION: single (Sidekiq::Client.push one by one), bulk (Sidekiq::Client.push_bulk
# in batches of BATCH), probe (COUNT ProbeJobs at RATE per second, each carrying
# Time.now.to_f at the push). JOB: incr (IncrJob, the default) or noop (NoopJob).
# Like bench/others/client.py: one untimed warm-up JOB first (so the queue holds
# COUNT + 1 jobs; an IncrJob for probe); "probe" waits for a worker to run it.
# Prints one JSON line: seconds (timed part), count, total.
require "json"
require "sidekiq"

# Debian pairs sidekiq 6.4.1 with redis-rb 4.8, which prints a deprecation warning to stderr on
# every BRPOP (positional timeout) and SADD (return type) Sidekiq 6.4 makes: a log write per job
# fetched or pushed. Silenced, as an app would do; Sidekiq's numbers would include it otherwise.
Redis.silence_deprecations = true if Redis.respond_to?(:silence_deprecations=)

Sidekiq.configure_client do |config|
  config.redis = { url: ENV.fetch("BENCH_REDIS_URL"), size: 1 }
end

action = ARGV.fetch(0)
count = Integer(ARGV.fetch(1))
batch = Integer(ARGV.fetch(2, "1000"))
rate = Float(ARGV.fetch(3, "200"))
job = { "incr" => "IncrJob", "noop" => "NoopJob" }.fetch(ARGV.fetch(4, "incr"))
job = "IncrJob" if action == "probe"

def now
  Process.clock_gettime(Process::CLOCK_MONOTONIC)
end

Sidekiq::Client.push("class" => job, "queue" => "bench", "args" => []) # warm-up, untimed

case action
when "single"
  started = now
  count.times { Sidekiq::Client.push("class" => job, "queue" => "bench", "args" => []) }
  seconds = now - started
when "bulk"
  started = now
  done = 0
  while done < count
    size = [batch, count - done].min
    Sidekiq::Client.push_bulk("class" => job, "queue" => "bench", "args" => Array.new(size) { [] })
    done += size
  end
  seconds = now - started
when "probe"
  deadline = now + 60
  until Sidekiq.redis { |conn| conn.get("bench:counter").to_i } >= 1
    abort("probe: no worker ran the warm-up job") if now > deadline
    sleep 0.01
  end
  sleep 0.5
  interval = 1.0 / rate
  started = next_at = now
  count.times do
    current = now
    sleep(next_at - current) if current < next_at
    Sidekiq::Client.push("class" => "ProbeJob", "queue" => "bench", "args" => [Time.now.to_f])
    next_at += interval
  end
  seconds = now - started
else
  abort("unknown action #{action}")
end
puts JSON.generate("seconds" => seconds, "count" => count, "total" => count + 1)
$stdout.flush
