"""Interop with real Ruby Sidekiq (Debian's ruby-sidekiq 6.4.1): Ruby scripts and their Python helpers."""
