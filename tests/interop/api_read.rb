# Sidekiq's own read API over whatever is in Redis (a djwork cluster, a Ruby one, or both): touches
# every reader the Web UI uses and prints one JSON document. Any exception ends the script with a
# non-zero status and the backtrace on stderr: the Python test requires a clean run.
require_relative "boot"
require "sidekiq/api"

def record(job)
  {
    "jid" => job.jid, "klass" => job.klass, "display_class" => job.display_class,
    "display_args" => job.display_args, "args" => job.args, "queue" => job.queue,
    "enqueued_at" => job.enqueued_at&.to_f, "created_at" => job.created_at&.to_f,
    "latency" => job.latency, "tags" => job.tags, "item" => job.item,
    "error_class" => job["error_class"], "error_message" => job["error_message"],
    "retry_count" => job["retry_count"], "failed_at" => job["failed_at"], "retried_at" => job["retried_at"],
    "error_backtrace" => job.error_backtrace
  }
end

def entries(set)
  set.map do |entry|
    record(entry).merge("score" => entry.score, "at" => entry.at.to_f, "error" => entry.error?,
      "web_key" => "#{entry.score}-#{entry.jid}")
  end
end

# One busy thread's entry: a Hash in 6.4, a Sidekiq::Work in 7 (whose `[]` is deprecated and warns).
def work_field(work, name)
  work.is_a?(Hash) ? work[name] : work.raw(name)
end

stats = Sidekiq::Stats.new
history = Sidekiq::Stats::History.new(2)
out = {
  "version" => Sidekiq::VERSION,
  "stats" => {
    "processed" => stats.processed, "failed" => stats.failed, "enqueued" => stats.enqueued,
    "scheduled_size" => stats.scheduled_size, "retry_size" => stats.retry_size, "dead_size" => stats.dead_size,
    "processes_size" => stats.processes_size, "workers_size" => stats.workers_size,
    "default_queue_latency" => stats.default_queue_latency, "queues" => stats.queues,
    "history_processed" => history.processed, "history_failed" => history.failed
  },
  "queues" => Sidekiq::Queue.all.map { |queue|
    {"name" => queue.name, "size" => queue.size, "latency" => queue.latency, "paused" => queue.paused?,
     "jobs" => queue.map { |job| record(job) }}
  },
  "processes" => Sidekiq::ProcessSet.new.map { |process|
    {"identity" => process.identity, "hostname" => process["hostname"], "pid" => process["pid"],
     "tag" => process.tag, "labels" => process.labels, "queues" => process.queues,
     "concurrency" => process["concurrency"], "busy" => process["busy"], "beat" => process["beat"],
     "quiet" => process["quiet"], "stopping" => process.stopping?, "started_at" => process["started_at"],
     "started_time" => Time.at(process["started_at"]).to_f, "rss" => process["rss"], "rtt_us" => process["rtt_us"],
     "version" => process["version"], "weights" => process["weights"], "embedded" => process["embedded"]}
  },
  "process_set" => {"size" => Sidekiq::ProcessSet.new(false).size,
                    "total_concurrency" => Sidekiq::ProcessSet.new(false).total_concurrency,
                    "total_rss_in_kb" => Sidekiq::ProcessSet.new(false).total_rss_in_kb,
                    "leader" => Sidekiq::ProcessSet.new(false).leader},
  "workers" => Sidekiq::Workers.new.map { |process_id, thread_id, work|
    job = Sidekiq::JobRecord.new(work_field(work, "payload"))
    {"process" => process_id, "thread" => thread_id, "queue" => work_field(work, "queue"),
     "run_at" => work_field(work, "run_at"), "run_time" => Time.at(work_field(work, "run_at")).to_f,
     "jid" => job.jid, "klass" => job.klass,
     "display_class" => job.display_class, "args" => job.display_args}
  },
  "workers_size" => Sidekiq::Workers.new.size,
  "retry" => entries(Sidekiq::RetrySet.new),
  "scheduled" => entries(Sidekiq::ScheduledSet.new),
  "dead" => entries(Sidekiq::DeadSet.new)
}
Interop.dump(out)
