# Sidekiq's own client pushing jobs for djwork: `ruby client.rb` reads a JSON list of operations on
# stdin and prints a JSON list of results (the jids Sidekiq returned), one per operation.
#
#   {"op": "push", "item": {...}}          Sidekiq::Client.push(item)       ("at" schedules it)
#   {"op": "push_bulk", "item": {...}}     Sidekiq::Client.push_bulk(item)  ("args" = list of arg lists)
#   {"op": "perform_async", "args": [...], "options": {...}}   InteropAliasJob.set(options).perform_async
#   {"op": "perform_in", "seconds": n, "args": [...]}           InteropAliasJob.perform_in
#   {"op": "retry_all", "set": "retry"|"dead"}                  RetrySet/DeadSet#retry_all (the Web UI's button);
#                                                               returns how many jobs it pushed back
#
# InteropAliasJob exists here only to enqueue (a Ruby app's stub of a job that Python runs): djwork
# maps the name to one of its jobs through DJWORK["ALIASES"].
require_relative "boot"
require "sidekiq/api"

class InteropAliasJob
  include Sidekiq::Worker
  sidekiq_options queue: "interop"

  def perform(*)
    raise "InteropAliasJob runs in djwork, not in Ruby"
  end
end

ops = JSON.parse($stdin.read)
results = ops.map do |op|
  case op.fetch("op")
  when "push" then Sidekiq::Client.push(op.fetch("item"))
  when "push_bulk" then Sidekiq::Client.push_bulk(op.fetch("item"))
  when "perform_async" then InteropAliasJob.set(op.fetch("options", {})).perform_async(*op.fetch("args"))
  when "perform_in" then InteropAliasJob.perform_in(op.fetch("seconds"), *op.fetch("args"))
  when "retry_all"
    set = {"retry" => Sidekiq::RetrySet, "dead" => Sidekiq::DeadSet}.fetch(op.fetch("set")).new
    # Sidekiq 6.4's retry_all is `each(&:retry) while size > 0`: a job that fails back into
    # the set before Ruby checks its size again is pushed again. Count every push it makes.
    pushed = 0
    counting = Module.new { define_method(:push) { |item| pushed += 1; super(item) } }
    Sidekiq::Client.prepend(counting)
    set.retry_all
    pushed
  else abort("client.rb: unknown op #{op.inspect}")
  end
end
Interop.dump(results)
