# Shared by every Ruby script of the interop tests (tests/test_interop_*.py).
#
# Points Sidekiq at the test suite's private Redis and nowhere else: the URL
# comes from REDIS_URL, which the Python side sets for the Ruby process only.
# Sidekiq falls back to redis://localhost:6379 when REDIS_URL is missing, so a
# missing URL, or one on port 6379 (the machine's shared Redis), is refused.
require "json"
require "uri"
require "sidekiq"

# redis-rb 4.8 (Debian's, under Sidekiq 6.4.1) warns on every BRPOP and SADD Sidekiq makes. Sidekiq 7
# talks through redis-client and never loads redis-rb: there is no `Redis` constant to configure.
Redis.silence_deprecations = true if defined?(Redis) && Redis.respond_to?(:silence_deprecations=)

module Interop
  def self.redis_url
    url = ENV["REDIS_URL"].to_s
    begin
      uri = URI.parse(url)
    rescue URI::InvalidURIError
      uri = nil
    end
    ok = uri && ((uri.scheme == "unix" && !uri.path.to_s.empty?) ||
                 (%w[redis rediss].include?(uri.scheme) && uri.port && uri.port != 6379))
    abort("interop: REDIS_URL must name the test suite's private Redis, got #{url.inspect}") unless ok
    url
  end

  URL = redis_url

  # Sidekiq 7 moved the server's settings from `Sidekiq.options` to the config object that
  # `configure_server` yields (6.4's yields the Sidekiq module itself, which has `options`).
  def self.set_option(config, name, value)
    if config.respond_to?(:options)
      config.options[name] = value
    else
      config[name] = value
    end
  end

  def self.sidekiq7?
    Gem::Version.new(Sidekiq::VERSION) >= Gem::Version.new("7")
  end

  def self.dump(value)
    $stdout.write(JSON.generate(value))
    $stdout.write("\n")
    $stdout.flush
  end
end

Sidekiq.configure_client { |config| config.redis = {url: Interop::URL, size: 2} }
Sidekiq.configure_server { |config| config.redis = {url: Interop::URL} }
Sidekiq.logger.level = Logger::WARN unless Sidekiq.server?
