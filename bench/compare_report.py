"""bench/compare.py's output: the machine and versions, the tables, and issue #20's targets checked against them."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from common import ROOT
from compare_measure import Result, top_commands
from compare_procs import System, version_of

COLUMNS = [  # heading, keys (a pair is shown "1p / 2p"), format, with an "x djwork" column
    ("enqueue 1x1 /s", ("enqueue",), "{:,.0f}", True),
    ("enqueue bulk /s", ("bulk",), "{:,.0f}", True),
    ("drain 1p /s", ("drain1",), "{:,.0f}", True),
    ("drain 2p /s", ("drain2",), "{:,.0f}", True),
    ("worker CPU us/job 1p / 2p", ("worker1", "worker2"), "{:.0f}", True),
    ("Redis CPU us/job 1p / 2p", ("redis1", "redis2"), "{:.1f}", True),
    ("Redis cmds/job 1p / 2p", ("commands1", "commands2"), "{:.2f}", False),
    ("Redis bytes/job 1p / 2p", ("bytes1", "bytes2"), "{:,.0f}", False),
    ("p50 ms", ("p50",), "{:.2f}", True),
    ("p99 ms", ("p99",), "{:.2f}", True),
    ("RSS MB", ("rss",), "{:.1f}", True),
]


# --------------------------------------------------------------------------- machine and versions


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown CPU"


def machine() -> str:
    return f"{cpu_model()}, {os.cpu_count()} CPUs ({len(os.sched_getaffinity(0))} usable)"


def command_output(command: list[str]) -> str:
    try:
        return subprocess.run(command, capture_output=True, text=True, timeout=30, cwd=ROOT).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def versions(redis_version: str, systems: list[System]) -> str:
    commit = command_output(["git", "rev-parse", "--short", "HEAD"]) or "?"
    dirty = "+changes" if command_output(["git", "status", "--porcelain", "--untracked-files=no"]) else ""
    parts = [f"Python {sys.version.split()[0]}", f"djwork {version_of('djwork')} ({ROOT.name}@{commit}{dirty})",
             f"redis-server {redis_version}"]
    ruby = command_output(["ruby", "-e", "print RUBY_VERSION"])
    if ruby:
        parts.append(f"Ruby {ruby}")
    parts += [f"{system.label} {system.version}" for system in systems if system.program != "djwork"]
    return ", ".join(parts)


def command_line() -> str:
    return " ".join(["bench/compare.py", *sys.argv[1:]])


# --------------------------------------------------------------------------- tables


def build_rows(results: list[Result]) -> tuple[list[str], list[list[str]]]:
    values = [result.values() for result in results]
    columns = [c for c in COLUMNS if any(key in found for found in values for key in c[1])]
    base = next((found for result, found in zip(results, values, strict=True) if result.system.key == "djwork"), {})
    header = ["system"]
    for heading, _keys, _fmt, ratio in columns:
        header += [heading, "x djwork"] if ratio else [heading]
    rows = []
    for result, found in zip(results, values, strict=True):
        row = [f"{result.system.label} {result.system.version}"]
        for _heading, keys, fmt, ratio in columns:
            cells, ratios = [], []
            for key in keys:
                if key not in found:
                    cells.append("fail")
                    ratios.append("")
                elif found[key] is None:
                    cells.append("-")
                    ratios.append("")
                else:
                    cells.append(fmt.format(found[key]))
                    reference = base.get(key)
                    ratios.append(f"{found[key] / reference:.2f}x" if reference else "")
            row.append(" / ".join(cells))
            if ratio:
                row.append(" / ".join(ratios) if any(ratios) else "")
        rows.append(row)
    return header, rows


def text_table(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    line = lambda cells: "  ".join(  # noqa: E731
        cell.ljust(widths[i]) if i == 0 else cell.rjust(widths[i]) for i, cell in enumerate(cells))
    return "\n".join([line(header), "  ".join("-" * w for w in widths), *(line(row) for row in rows)])


def markdown_table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(["---"] + ["---:"] * (len(header) - 1)) + "|"]
    lines += ["| " + " | ".join(cell or " " for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def command_notes(results: list[Result]) -> list[str]:
    """The top Redis commands per job of each drain (the last round's), for the notes under a table."""
    notes = []
    for result in results:
        for processes, per_command in sorted(result.commands.items()):
            notes.append(f"{result.system.label} {processes} commands/job: {top_commands(per_command)}")
    return notes


# --------------------------------------------------------------------------- issue #20's targets


def ratio_check(label: str, parts: list[tuple[str, float | None, float | None]], holds: Callable[[float], bool],
                bar: str) -> str:
    """One target over (name, djwork, Sidekiq) pairs: each part's djwork/Sidekiq ratio, met when all hold."""
    shown, met = [], True
    for name, ours, theirs in parts:
        if ours is None or theirs is None:
            shown.append(f"{name} n/a")
            met = False
            continue
        ratio = ours / theirs
        met = met and holds(ratio)
        shown.append(f"{name} {ratio:.2f}x ({ours:,.1f} vs {theirs:,.1f})")
    return f"{label} [{bar}]: {'; '.join(shown)}: {'met' if met else 'NOT met'}"


def verdict(ok: bool | None) -> str:
    return "n/a" if ok is None else ("met" if ok else "NOT met")


def targets(by_kind: dict[str, dict[str, Result]], latency_kind: str) -> list[str]:
    """Targets 1-4 and 7 of issue #20, djwork against Sidekiq in this run (medians over the rounds)."""
    def value(kind: str, system: str, key: str) -> float | None:
        result = by_kind.get(kind, {}).get(system)
        return result.values().get(key) if result else None

    lines = []
    if "noop" in by_kind:
        lines.append(ratio_check("target 1, no-op drain", [
            (p, value("noop", "djwork", f"drain{n}"), value("noop", "sidekiq", f"drain{n}"))
            for p, n in (("1p", 1), ("2p", 2))], lambda r: r >= 2.0, "djwork >= 2x Sidekiq, 1p and 2p"))
        lines.append(ratio_check("target 2, Redis CPU per no-op job", [
            (p, value("noop", "djwork", f"redis{n}"), value("noop", "sidekiq", f"redis{n}"))
            for p, n in (("1p", 1), ("2p", 2))], lambda r: r <= 0.5, "djwork <= 0.5x Sidekiq's"))
    if "incr" in by_kind:
        lines.append(ratio_check("target 3, INCR drain", [
            (p, value("incr", "djwork", f"drain{n}"), value("incr", "sidekiq", f"drain{n}"))
            for p, n in (("1p", 1), ("2p", 2))], lambda r: r >= 1.2, "djwork >= 1.2x Sidekiq, 1p and 2p"))
    p50, p99 = value(latency_kind, "djwork", "p50"), value(latency_kind, "djwork", "p99")
    their_p99 = value(latency_kind, "sidekiq", "p99")
    if p50 is not None and p99 is not None and their_p99 is not None:
        lines.append(f"target 4, pickup latency [p99 <= Sidekiq's, p50 <= 1 ms]: p99 {p99:.2f} vs {their_p99:.2f} ms "
                     f"({p99 / their_p99:.2f}x), p50 {p50:.2f} ms: {verdict(p99 <= their_p99 and p50 <= 1.0)}")
    else:
        lines.append("target 4, pickup latency: n/a (latency skipped or failed)")
    def djwork_samples(key: str) -> list[float]:
        """Every round's and every body's: delay() and delay_many do not depend on the job's body."""
        return [v for results in by_kind.values() if "djwork" in results
                for v in results["djwork"].samples.get(key, [])]

    delays, bulks, rsses = djwork_samples("enqueue"), djwork_samples("bulk"), djwork_samples("rss")
    pipelines = djwork_samples("pipeline")  # each timed right before a delay() run
    delay = statistics.median(delays) if delays else None
    bulk = statistics.median(bulks) if bulks else None
    rss = max(rsses) if rsses else None
    pipeline = statistics.median(pipelines) if pipelines else None
    parts = []
    if delay is not None and pipeline is not None:
        parts.append(f"delay() {delay:,.0f}/s vs the LPUSH+SADD pipeline loop {pipeline:,.0f}/s "
                     f"({delay / pipeline:.2f}x, bar 0.90x; medians of {len(delays)} and {len(pipelines)} runs): "
                     f"{verdict(delay >= 0.9 * pipeline)}")
    else:
        parts.append("delay() vs the pipeline loop: n/a")
    parts.append(f"delay_many {bulk:,.0f}/s (bar 50,000): {verdict(bulk >= 50_000)}" if bulk is not None
                 else "delay_many: n/a")
    parts.append(f"worker RSS {rss:.1f} MB, the largest after a 1p drain (bar 80): {verdict(rss <= 80)}"
                 if rss is not None else "worker RSS: n/a")
    parts.append("nothing lost on kill -9: not measured here (./dev chaos)")
    lines.append("target 7, no regression: " + "; ".join(parts))
    return lines


def results_cost(by_kind: dict[str, dict[str, Result]]) -> list[str]:
    """--results on: djwork with RESULTS=True against djwork on its defaults, per body (medians over the rounds)."""
    lines = []
    for kind, results in by_kind.items():
        if "djwork" not in results or "djwork+results" not in results:
            continue
        plain, stored = results["djwork"].values(), results["djwork+results"].values()
        parts = []
        for label, key, fmt in (("drain", "drain", "{:,.0f} jobs/s"), ("Redis CPU", "redis", "{:.1f} us/job"),
                                ("Redis bytes", "bytes", "{:,.0f} /job")):
            for processes in ("1", "2"):
                ours, base = stored.get(key + processes), plain.get(key + processes)
                if ours is None or base is None:
                    parts.append(f"{label} {processes}p n/a")
                    continue
                ratio = f" ({ours / base:.2f}x)" if base > 0 else ""
                parts.append(f"{label} {processes}p {fmt.format(ours)} vs {fmt.format(base)}{ratio}")
        lines.append(f"--job {kind}, results on vs the default: " + "; ".join(parts))
    return lines
