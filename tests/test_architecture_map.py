"""docs/architecture.md is the map of the code: every module and every Lua script is named on it.

A module added without a line there fails here, naming the module, so the map can't fall behind
the folders; so do a module name used twice under djwork/ with two meanings, and a top level
that grows past its limit (the folders are the architecture). A package's ``__init__.py`` counts
as named when the package's folder is (``djwork/api/``); a Lua script by its path (``lua/fetch.lua``).
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MAP = ROOT / "docs" / "architecture.md"
PACKAGES = ("djwork", "djwork_dashboard")
QUESTIONS = ("retry decision", "limiter decision", "periodic claim", "batch callback firing",
             "unique-lock release", "result write", "revoke drop")


def _named(path: str, text: str) -> bool:
    if path.endswith("/__init__.py"):
        return f"`{path}`" in text or f"`{path.removesuffix('__init__.py')}" in text
    return f"`{path}`" in text


def _modules() -> list[str]:
    return [path.relative_to(ROOT).as_posix() for package in PACKAGES for path in sorted((ROOT / package).rglob("*.py"))
            if "__pycache__" not in path.parts and not path.is_relative_to(ROOT / "djwork" / "lua")]


def test_the_map_names_every_module_and_every_lua_script():
    text = MAP.read_text(encoding="utf-8")
    modules = _modules()
    scripts = [path.relative_to(ROOT).as_posix() for path in sorted((ROOT / "lua").glob("*.lua"))]
    assert len(modules) > 100 and len(scripts) > 20  # guards the guard: the walk found the code
    missing = [path for path in [*modules, *scripts] if not _named(path, text)]
    assert not missing, "docs/architecture.md does not name (add a row or a mention):\n  " + "\n  ".join(missing)


def test_the_map_names_no_module_that_is_gone():
    # A renamed or deleted module left on the map sends a reader to a file that isn't there.
    import re

    text = MAP.read_text(encoding="utf-8")
    named = set(re.findall(r"`((?:djwork|djwork_dashboard)/[\w/]+\.py|lua/\w+\.lua)`", text))
    gone = sorted(path for path in named if not (ROOT / path).exists())
    assert named and not gone, f"docs/architecture.md names files that don't exist: {gone}"


def test_the_where_does_x_live_table_answers_each_question():
    text = MAP.read_text(encoding="utf-8")
    section = text.split("## Where does X live", 1)[1].split("\n## ", 1)[0]
    rows = {line.split("|")[1].strip(): line for line in section.splitlines() if line.startswith("| ")}
    for question in QUESTIONS:
        row = next((line for first, line in rows.items() if first.startswith(question)), None)
        assert row is not None, f"no row for {question!r} in architecture.md's 'Where does X live'"
        assert "`djwork/" in row and "`lua/" in row, f"{question!r}: name both the module and the Lua script"


# A feature's sides share its name: djwork/api/<x>.py reads it, djwork/worker/<x>.py runs it in the worker
# (and djwork/cli/<x>.py, where the manage.py djwork command has one); those repeats are one meaning.
SIDE_PACKAGES = ("djwork/api/", "djwork/worker/", "djwork/cli/")
# Other names that repeat with one meaning, each with its why: checks.py is a package's system checks
# (settings/, periodic/); plan.py is what a step will write, worked out before it writes (a canvas's
# batches and first jobs; a periodic tick's slots). A new repeated name is a second meaning until it
# is added here with its why.
SHARED_MODULE_NAMES = {
    "checks.py", "plan.py",
    "run_hook.py",  # a feature's RunHook (batches/, periodic/): one meaning, in each feature's own package
}
# At most this many modules directly in djwork/: the rest live in packages by responsibility.
MAX_TOP_LEVEL_MODULES = 16


def test_no_two_modules_in_djwork_share_a_name_with_different_meanings():
    places: dict[str, list[str]] = {}
    for path in _modules():
        if path.startswith("djwork/") and not path.endswith("/__init__.py"):
            places.setdefault(Path(path).name, []).append(path)
    repeated = {name: paths for name, paths in places.items() if name not in SHARED_MODULE_NAMES
                and len([path for path in paths if not path.startswith(SIDE_PACKAGES)]) > 1}
    assert not repeated, ("module names used twice under djwork/ outside a feature's sides (rename one, or add "
                          f"the name to SHARED_MODULE_NAMES with why both mean the same thing): {repeated}")


def test_djwork_top_level_stays_small():
    top = sorted(path.name for path in (ROOT / "djwork").glob("*.py"))
    assert len(top) <= MAX_TOP_LEVEL_MODULES, (
        f"{len(top)} modules directly in djwork/ (at most {MAX_TOP_LEVEL_MODULES}): put the new one in the "
        f"package of its responsibility (docs/architecture.md, Packages and modules): {top}")
