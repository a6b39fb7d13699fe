# Sidekiq's process API on one identity: `ruby control.rb quiet|stop|dump <identity>`.
# Finds the process through Sidekiq::ProcessSet (as the Busy page does) and calls quiet!, stop!
# or dump_threads; exits 2 if the identity is not a live process. Prints the process's fields.
require_relative "boot"
require "sidekiq/api"

action, identity = ARGV
process = Sidekiq::ProcessSet.new.find { |p| p.identity == identity }
unless process
  warn "control.rb: no process #{identity} in Sidekiq::ProcessSet"
  exit 2
end
case action
when "quiet" then process.quiet!
when "stop" then process.stop!
when "dump" then process.dump_threads
else abort("control.rb: unknown action #{action.inspect}")
end
Interop.dump("identity" => process.identity, "action" => action, "stopping" => process.stopping?)
