"""The worker runtime: Launcher -> Manager per capsule -> Processor threads, plus Heartbeat,
Scheduled poller and Reaper. See docs/architecture.md for the process model."""
