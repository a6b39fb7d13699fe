"""Execution metrics: Sidekiq 8's histogram layout and the Prometheus exposition (docs/metrics.md)."""
