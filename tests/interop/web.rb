# Sidekiq::Web, as a host application mounts it: a Rack app behind a cookie session (Sidekiq::Web's
# CSRF protection needs one).
#
#   ruby web.rb check [PATH ...]  Rack::MockRequest GETs every page (/, /busy, /queues, /queues/<name>
#                                 for each queue, /retries, /scheduled, /morgue, /stats, /stats/queues,
#                                 /dashboard/stats and every retry/scheduled/dead detail page) plus PATHs;
#                                 prints {"pages": {path: {"status", "body"}}}
#   ruby web.rb serve PORT        the same app on a real WEBrick server at 127.0.0.1:PORT
require_relative "boot"
require "sidekiq/api"
require "sidekiq/web"
require "rack"
require "rack/session/cookie"

APP = Rack::Builder.new do
  use Rack::Session::Cookie, secret: "djwork-interop-" + ("s" * 64), same_site: true, max_age: 86_400
  run Sidekiq::Web
end.to_app

def detail_paths
  paths = []
  {"retries" => Sidekiq::RetrySet, "scheduled" => Sidekiq::ScheduledSet, "morgue" => Sidekiq::DeadSet}.each do |page, set|
    set.new.each { |entry| paths << "/#{page}/#{entry.score}-#{entry.jid}" }
  end
  paths
end

case ARGV.shift
when "check"
  paths = %w[/ /busy /queues /retries /scheduled /morgue /stats /stats/queues /dashboard/stats]
  paths += Sidekiq::Queue.all.map { |queue| "/queues/#{queue.name}" }
  paths += detail_paths + ARGV
  request = Rack::MockRequest.new(APP)
  pages = paths.uniq.to_h do |path|
    response = request.get(path)
    [path, {"status" => response.status, "body" => response.body, "location" => response.headers["Location"]}]
  end
  Interop.dump("pages" => pages)
when "serve"
  require "webrick"
  # Rack 3 moved the server handlers out to the rackup gem (Rackup::Handler); Rack 2 still has them.
  handler = begin
    require "rackup/handler/webrick"
    Rackup::Handler::WEBrick
  rescue LoadError
    require "rack/handler/webrick"
    Rack::Handler::WEBrick
  end
  port = Integer(ARGV.shift)
  $stdout.sync = true
  handler.run(APP, Host: "127.0.0.1", Port: port, AccessLog: [],
    Logger: WEBrick::Log.new($stderr, WEBrick::Log::WARN),
    StartCallback: -> { puts "listening on 127.0.0.1:#{port}" })
else
  abort("usage: web.rb check [PATH ...] | web.rb serve PORT")
end
