"""Every code block of docs/*.md and README.md is checked, so a docs example can't rot unnoticed.

How each block is checked is said in the markdown (tests/docs_blocks.py): an
unmarked python block runs here, against the suite's private Redis, with the
settings its marker states and, if it asks, a djwork worker running in this
process; a block marked ``not-run`` still compiles; a shell block's commands
(``manage.py`` subcommands, ``./dev`` verbs, files of the repo) must exist.
A block added later without a marker must run, or be marked.
"""

from __future__ import annotations

import importlib
import json
import re
import shlex
import sys
import time
import types
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from types import SimpleNamespace
from typing import Any

import pytest
from django.conf import settings
from django.core.management import get_commands
from django.test import override_settings

from djwork import jobs as djwork_jobs
from djwork.payload import new_jid
from djwork.settings.conf import get_config
from djwork.worker.launcher import Launcher
from tests.docs_blocks import ROOT, Block, all_blocks, run_chain

BLOCKS = all_blocks()
CHECKED_LANGUAGES = {"python", "sh", "json"}
# Programs a shell block may name that are not the repo's own (which are checked for existence instead).
EXTERNAL_PROGRAMS = {"apt-get", "brew", "gunicorn", "pip"}
DEV_VERBS = {"test", "chaos", "demo", "bench"}


def _ids(block: Block) -> str:
    return block.where


def givens() -> dict[str, Any]:
    """What the prose around a block supplies and the block uses without defining (the reader's own data)."""
    return {
        "when": time.time() + 3600,  # "perform_at(when, ...)": a datetime or epoch seconds, in the future
        "timedelta": timedelta,
        "pairs": [(1, 2), (3, 4)],
        "jid": new_jid(),  # "djwork.revoke(jid)": some job's id
        # The third-party APIs a limiter guards in docs/limiters.md (the reader's, not djwork's).
        "stripe_api": SimpleNamespace(charge=lambda *args, **kwargs: None),
        "github": SimpleNamespace(graphql=lambda query: SimpleNamespace(cost=30)),
        "query": "{ viewer { login } }",
    }


def test_every_block_says_how_it_is_checked():
    unchecked = [block.where for block in BLOCKS if block.language not in CHECKED_LANGUAGES and block.marker is None]
    assert not unchecked, ("these blocks are checked by nothing: give them a language (python, sh, json) or a "
                           f"<!-- not-run: why --> marker before the fence: {unchecked}")


@pytest.mark.parametrize("block", [b for b in BLOCKS if b.language == "python"], ids=_ids)
def test_python_block_compiles(block):
    compile(block.source, block.where, "exec")


@pytest.mark.parametrize("block", [b for b in BLOCKS if b.language == "json"], ids=_ids)
def test_json_block_parses(block):
    json.loads(block.source)


@contextmanager
def _worker(wanted: bool) -> Iterator[None]:
    """A real djwork worker in this process (the embedded kind), if ``wanted``: it runs the jobs the block
    defines, which only this process can import."""
    if not wanted:
        yield
        return
    launcher = Launcher(get_config(), embedded=True)
    launcher.start()
    try:
        yield
    finally:
        launcher.stop(timeout=5)


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("block", [b for b in BLOCKS if b.runs], ids=_ids)
def test_python_block_runs(block, raw_redis):
    chain = run_chain(block, BLOCKS)
    djwork_settings = dict(settings.DJWORK)
    for part in chain:
        djwork_settings.update(part.settings)
    registered = dict(djwork_jobs.registry)
    # A module of its own, importable while the block runs (a Django task is found by its dotted path):
    # the block's jobs are registered under its name, apart from every other block's.
    module = types.ModuleType(f"docs_example_{block.path.stem}_{block.line}".replace("-", "_"))
    module.__dict__.update(givens())
    namespace = module.__dict__
    sys.modules[module.__name__] = module
    try:
        with override_settings(DJWORK=djwork_settings), _worker(any(part.worker for part in chain)):
            for part in chain:
                exec(compile(part.source, part.where, "exec"), namespace)
    finally:
        del sys.modules[module.__name__]
        djwork_jobs.registry.clear()
        djwork_jobs.registry.update(registered)


def _command_lines(source: str) -> Iterator[list[str]]:
    for line in source.replace("\\\n", " ").splitlines():
        words = shlex.split(line, comments=True)
        if words:
            yield words


def _check_command(words: list[str], where: str) -> None:
    program, rest = words[0], words[1:]
    if program == "python" and rest[:1] == ["manage.py"]:
        assert rest[1] in get_commands(), f"{where}: manage.py has no {rest[1]!r} command"
    elif program == "./dev":
        assert rest[0] in DEV_VERBS, f"{where}: ./dev has no {rest[0]!r} verb ({sorted(DEV_VERBS)})"
        if rest[0] == "bench" and len(rest) > 1:
            assert (ROOT / "bench" / f"{rest[1]}.py").exists(), f"{where}: no benchmark called {rest[1]!r}"
    elif program.startswith((".venv/bin/", "./")):
        tool = program.rsplit("/", 1)[1]
        if tool == "python":
            assert (ROOT / rest[0]).exists(), f"{where}: {rest[0]} does not exist"
        else:
            assert tool in EXTERNAL_PROGRAMS, f"{where}: unknown program {program!r}"
    elif program.startswith(".ci/"):
        assert (ROOT / program).is_file(), f"{where}: {program} does not exist"
    else:
        assert program in EXTERNAL_PROGRAMS, f"{where}: unknown program {program!r}"
    if program == "gunicorn" and "-c" in words:
        config = words[words.index("-c") + 1]
        if config.startswith("python:"):
            importlib.import_module(config.removeprefix("python:"))


def test_the_dev_verbs_listed_here_are_the_scripts():
    script = (ROOT / "dev").read_text()
    assert {verb for verb in DEV_VERBS if f"\n  {verb}) " in script} == DEV_VERBS


@pytest.mark.parametrize("block", [b for b in BLOCKS if b.language == "sh"], ids=_ids)
def test_shell_block_commands_exist(block):
    for words in _command_lines(block.source):
        _check_command(words, block.where)


def _repeated_runs(paragraph: str, words: int = 10) -> list[str]:
    """Runs of ``words`` words a paragraph's prose says twice (inline code counts as one word)."""
    prose = re.sub(r"`[^`]*`", "`code`", " ".join(
        line for line in paragraph.splitlines() if not line.lstrip().startswith(("|", "<!--"))))
    tokens = prose.split()
    first_seen: dict[str, int] = {}
    repeated = []
    for index in range(len(tokens) - words + 1):
        run = " ".join(tokens[index:index + words])
        if run in first_seen and index - first_seen[run] >= words:
            repeated.append(run)
        first_seen.setdefault(run, index)
    return repeated


@pytest.mark.parametrize("page", [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))],
                         ids=lambda page: page.name)
def test_no_paragraph_says_the_same_thing_twice(page):
    # A merge that kept both sides of a line left docs/dashboard.md saying one sentence twice in a row.
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.DOTALL)
    repeats = {run for paragraph in re.split(r"\n\s*\n", text) for run in _repeated_runs(paragraph)}
    assert not repeats, f"{page.name} repeats itself within a paragraph: {sorted(repeats)[:3]}"


def test_sidekiq_page_points_to_djworks_own_pro_and_enterprise_features():
    # It once said djwork implemented none of batches, unique jobs, limiters, periodic jobs, leader election.
    page = (ROOT / "docs" / "sidekiq.md").read_text()
    assert "implements none of" not in page
    assert all(f"]({name})" in page for name in ("batches.md", "unique.md", "limiters.md", "periodic.md"))
