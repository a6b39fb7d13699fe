"""The worker runtime: a Launcher builds a Manager per capsule (processor threads fed by a Dispatcher and
Takers), plus Heartbeat, HistoryRecorder, Scheduled poller, Reaper and health probes. docs/architecture.md
draws who owns which state and who calls whom."""
