"""Celery's own integration tests, run against djwork: fetch, import swap, expected-failure list (docs/celery.md).

The celery sdist of ``CELERY_VERSION`` is downloaded from PyPI at test time
(``pip download --no-deps --no-binary``) into ``.cache/celery-suite/``, which
git ignores: Celery's code is never part of this repository. Three of its files
(``t/integration/tasks.py``, ``test_tasks.py``, ``test_canvas.py``) are
written next to it with one mechanical change, the import swap:

- every ``celery`` module becomes the djwork module holding its names
  (``MODULES``; ``celery.X`` becomes ``djwork.X`` otherwise), one name per
  import statement;
- each top-level statement of ``tasks.py`` (and each import of the test
  modules) runs guarded: a name it fails to bind becomes a ``Missing``
  placeholder that raises, when used, the error that stopped it. One task
  declared with a refused option (``pydantic=True``) then fails the tests
  that use it, not the whole module.

The tests' fixtures (``manager``, ``celery_session_app``, ...) come from
tests/support/celery_fixtures.py. tests/celery_suite_expected.txt lists each
test expected not to pass, with its reason; tests/test_celery_suite.py runs
the suite and fails on any test outside the list that fails, and on any test
on the list that passes.
"""

from __future__ import annotations

import ast
import hashlib
import re
import subprocess
import sys
import tarfile
import textwrap
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
CELERY_VERSION = "5.5.3"
CACHE = ROOT / ".cache" / "celery-suite"
EXPECTED = ROOT / "tests" / "celery_suite_expected.txt"
FILES = ("tasks.py", "test_tasks.py", "test_canvas.py")
TEST_FILES = ("test_tasks.py", "test_canvas.py")
PROCESSES = 3

# Celery's module -> djwork's module with the same names; any other celery.X becomes djwork.X.
MODULES = {
    "celery": "djwork",
    # AsyncResult, GroupResult and ResultSet: djwork exports all three (GroupResult and ResultSet are the
    # canvas's, which djwork.results can't import without a cycle).
    "celery.result": "djwork",
    "celery.states": "djwork.results.states",
    "celery.utils.log": "djwork.jobs.task_log",
    # Celery's trace log formats (LOG_RECEIVED, LOG_SUCCESS, ...), which its tests compare records with.
    "celery.app.trace": "djwork.worker.trace_log",
}

# The conftest of the generated package: every fixture and helper Celery's own conftest gave.
CONFTEST = '''"""Celery's integration fixtures over djwork: tests/support/celery_fixtures.py (generated file)."""
from tests.support.celery_fixtures import *  # noqa: F403
'''

# Celery's own test layout (its test classes are named test_*), and none of this repository's pytest options.
PYTEST_INI = """[pytest]
python_files = test_*.py
python_classes = test_*
python_functions = test_*
"""

# Defines Missing in each generated module: a placeholder that raises, when used, why its name is missing.
PRELUDE = '''
class _MissingType(type):
    def __getattr__(cls, attribute):
        raise AttributeError(f"{cls.__name__}.{attribute}: {cls.reason}")

    def __call__(cls, *args, **kwargs):
        raise NotImplementedError(f"{cls.__name__}: {cls.reason}")


class _Swapped:
    """``import celery``: attribute paths (``celery.app.trace``, ``celery.exceptions``) resolved by the swap."""

    def __init__(self, path):
        self._path = path

    def __getattr__(self, name):
        import importlib
        path = f"{self._path}.{name}"
        if path in _MODULES:
            return importlib.import_module(_MODULES[path])
        if any(mapped.startswith(path + ".") for mapped in _MODULES):
            return _Swapped(path)
        try:
            return getattr(importlib.import_module(_module_for(self._path)), name)
        except AttributeError:
            return importlib.import_module(_module_for(path))  # a submodule not imported yet


def _module_for(path):
    if path in _MODULES:
        return _MODULES[path]
    head, _, rest = path.partition(".")
    return f"djwork.{rest}" if head == "celery" and rest else path


def _missing(namespace, names, error):
    reason = f"not available in djwork: {type(error).__name__}: {error}"
    for name in names:
        namespace[name] = _MissingType(name, (Exception,), {"reason": reason})
'''


def module_for(celery_module: str) -> str:
    if celery_module in MODULES:
        return MODULES[celery_module]
    head, _, rest = celery_module.partition(".")
    return f"djwork.{rest}" if head == "celery" and rest else celery_module


def bound_names(statement: ast.stmt) -> list[str]:
    """The module-level names a statement binds (what becomes Missing if it fails)."""
    names: list[str] = []
    for node in ast.walk(statement):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.append(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.append(node.id)
        elif isinstance(node, ast.alias):
            names.append((node.asname or node.name).split(".")[0])
    return list(dict.fromkeys(names))


def swapped_imports(statement: ast.Import | ast.ImportFrom) -> list[str]:
    """One import statement per name, celery's modules swapped for djwork's."""
    if isinstance(statement, ast.Import):
        lines = []
        for alias in statement.names:
            target = module_for(alias.name)
            if alias.name == "celery" and not alias.asname:
                # ``celery.app.trace.LOG_SUCCESS`` must reach the module MODULES maps it to, which an alias of
                # djwork alone can't: djwork has no ``app`` package.
                lines.append("celery = _Swapped('celery')")
            elif target != alias.name:
                lines.append(f"import {target} as {alias.asname or alias.name}")
            else:
                lines.append(f"import {alias.name}" + (f" as {alias.asname}" if alias.asname else ""))
        return lines
    if statement.level:  # a relative import: Celery's own package (tasks, conftest)
        module = "." * statement.level + (statement.module or "")
    else:
        module = module_for(statement.module or "")
    return [f"from {module} import {alias.name}" + (f" as {alias.asname}" if alias.asname else "")
            for alias in statement.names]


NESTED_IMPORT = re.compile(r"^(\s+)from (celery[\w.]*) import\b", re.MULTILINE)


def swap_nested(code: str) -> str:
    """``from celery... import`` inside a function or block swapped too (unguarded: it runs with the test)."""
    return NESTED_IMPORT.sub(lambda match: f"{match[1]}from {module_for(match[2])} import", code)


def guarded(code: str, names: list[str]) -> str:
    return (f"try:\n{textwrap.indent(code, '    ')}\nexcept Exception as _error:\n"
            f"    _missing(globals(), {names!r}, _error)\n")


def swap(source: str, *, guard_everything: bool) -> str:
    """Celery's module with the import swap applied (module docstring and ``__future__`` imports first)."""
    tree = ast.parse(source)
    lines = source.splitlines()
    head: list[str] = []
    body: list[str] = []
    for statement in tree.body:
        start = min([statement.lineno, *(d.lineno for d in getattr(statement, "decorator_list", []))])
        code = "\n".join(lines[start - 1:statement.end_lineno])
        if isinstance(statement, ast.ImportFrom) and statement.module == "__future__":
            head.append(code)
        elif isinstance(statement, (ast.Import, ast.ImportFrom)):
            for line in swapped_imports(statement):
                body.append(guarded(line, bound_names(ast.parse(line).body[0])))
        elif guard_everything and not (isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant)):
            body.append(guarded(swap_nested(code), bound_names(statement)))
        else:
            body.append(swap_nested(code))
    return "\n".join([*head, PRELUDE, f"_MODULES = {MODULES!r}", *body]) + "\n"


@dataclass(frozen=True)
class Expected:
    """One test on the list: why it is expected not to pass."""

    nodeid: str
    # "refused" (by design, docs/celery.md), "not built", or "racy": Celery's test races its own worker, and
    # passes or fails by which thread runs first (counted neither way, as long as it runs).
    kind: str
    reason: str


KINDS = ("refused", "not built", "racy")


def read_expected(path: Path = EXPECTED) -> dict[str, Expected]:
    """``nodeid | kind | reason`` lines; ``#`` comments and blank lines skipped; malformed lines refused."""
    entries: dict[str, Expected] = {}
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        parts = [part.strip() for part in line.split(" | ")]
        if len(parts) != 3 or parts[1] not in KINDS or not parts[2]:
            raise ValueError(f"{path.name}:{number}: expected 'nodeid | refused, not built or racy | reason', "
                             f"got {line!r}")
        if parts[0] in entries:
            raise ValueError(f"{path.name}:{number}: {parts[0]} is listed twice")
        entries[parts[0]] = Expected(*parts)
    return entries


def sdist() -> Path:
    """The celery sdist, downloaded from PyPI once (pip's own client), then read from the cache."""
    CACHE.mkdir(parents=True, exist_ok=True)
    archive = CACHE / f"celery-{CELERY_VERSION}.tar.gz"
    if not archive.exists():
        subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary", ":all:",
                        f"celery=={CELERY_VERSION}", "--dest", str(CACHE)], check=True, timeout=300)
    return archive


def prepare() -> Path:
    """The generated tree (``<dir>/t/integration/...``), rebuilt when the sdist or this module changed."""
    archive = sdist()
    stamp = hashlib.sha256(archive.read_bytes() + Path(__file__).read_bytes()).hexdigest()[:16]
    tree = CACHE / f"celery-{CELERY_VERSION}-djwork-{stamp}"
    package = tree / "t" / "integration"
    if (package / "conftest.py").exists():
        return tree
    package.mkdir(parents=True, exist_ok=True)
    (tree / "t" / "__init__.py").write_text("")
    (package / "__init__.py").write_text("")
    with tarfile.open(archive) as sdist_file:
        for name in FILES:
            member = sdist_file.extractfile(f"celery-{CELERY_VERSION}/t/integration/{name}")
            assert member is not None, name
            source = member.read().decode("utf-8")
            (package / name).write_text(swap(source, guard_everything=name == "tasks.py"), encoding="utf-8")
    (tree / "pytest.ini").write_text(PYTEST_INI)
    (package / "conftest.py").write_text(CONFTEST)  # last: its presence marks a complete tree
    return tree


def outcomes(report: Path) -> dict[str, str]:
    """Each test's outcome in a junit report: ``passed``, ``failed`` (a failure or error, setup and teardown
    included) or ``skipped``, by the ids the list uses (``test_canvas.py::test_chain::test_simple_chain``)."""
    return {nodeid: outcome for nodeid, (outcome, _text) in read_report(report).items()}


def failure_texts(report: Path, nodeids: list[str], limit: int = 3000) -> str:
    """What the report says of each of ``nodeids`` that failed (its message and traceback, cut to ``limit``
    characters each): a failure outside the list names its cause, not only its name."""
    found = read_report(report)
    return "\n\n".join(f"--- {nodeid}\n{found[nodeid][1][-limit:]}" for nodeid in nodeids if nodeid in found)


def read_report(report: Path) -> dict[str, tuple[str, str]]:
    """Each test's outcome and its failures' text (message and traceback, every phase), by list id."""
    import xml.etree.ElementTree as ElementTree

    found: dict[str, tuple[str, str]] = {}
    for case in ElementTree.parse(report).getroot().iter("testcase"):
        parts = case.get("classname", "").split(".")
        module = next((index for index, part in enumerate(parts) if part.startswith("test_")), None)
        if module is None:
            # Not one of Celery's tests (a crashed process, an error outside any test): named as the report
            # names it, so the verdict shows it instead of this function raising.
            nodeid = "::".join(part for part in (case.get("classname", ""), case.get("name", "")) if part)
        else:
            nodeid = "::".join([f"{parts[module]}.py", *parts[module + 1:], case.get("name", "")])
        problems = [*case.iter("failure"), *case.iter("error")]
        if problems:
            outcome = "failed"
        elif case.find("skipped") is not None:
            outcome = "skipped"
        else:
            outcome = "passed"
        text = "\n".join(f"{problem.get('message', '')}\n{problem.text or ''}" for problem in problems)
        earlier_outcome, earlier_text = found.get(nodeid, ("", ""))
        if earlier_outcome != "failed":  # a test that passed and then errored in its teardown failed
            found[nodeid] = (outcome, text)
        elif text:
            found[nodeid] = (earlier_outcome, f"{earlier_text}\n{text}")
    return found


@dataclass(frozen=True)
class Verdict:
    """What a run says against the list: every mismatch, and the counts the docs quote."""

    failed_unlisted: list[str]  # failed but not on the list: a regression, or a list to extend
    passed_listed: list[str]  # on the list but passed: take it off the list
    listed_not_run: list[str]  # on the list, but no such test ran (renamed upstream, or a typo)
    passed: int
    skipped: int
    listed_by_kind: dict[str, int]

    @property
    def ok(self) -> bool:
        return not (self.failed_unlisted or self.passed_listed or self.listed_not_run)

    def describe(self) -> str:
        lines = [f"{self.passed} passed, {self.skipped} skipped by Celery's own marks; on the list: "
                 f"{self.listed_by_kind}"]
        for title, ids in (("failed, not on tests/celery_suite_expected.txt", self.failed_unlisted),
                           ("passed, but on tests/celery_suite_expected.txt (take them off)", self.passed_listed),
                           ("on tests/celery_suite_expected.txt, but not run (or skipped)", self.listed_not_run)):
            if ids:
                lines += [f"{title}:", *(f"  {nodeid}" for nodeid in ids)]
        return "\n".join(lines)


def judge(results: dict[str, str], expected: dict[str, Expected]) -> Verdict:
    kinds: dict[str, int] = {}
    for entry in expected.values():
        kinds[entry.kind] = kinds.get(entry.kind, 0) + 1
    return Verdict(
        failed_unlisted=sorted(nodeid for nodeid, outcome in results.items()
                               if outcome == "failed" and nodeid not in expected),
        passed_listed=sorted(nodeid for nodeid, outcome in results.items()
                             if outcome == "passed" and nodeid in expected and expected[nodeid].kind != "racy"),
        # Skipped by Celery's own marks (a RabbitMQ-only case, a known Celery issue): neither a pass nor a failure.
        listed_not_run=sorted(nodeid for nodeid in expected if results.get(nodeid, "skipped") == "skipped"),
        # A racy test's pass is not counted: it is on the list, counted there.
        passed=sum(1 for nodeid, outcome in results.items()
                   if outcome == "passed" and not (nodeid in expected and expected[nodeid].kind == "racy")),
        skipped=sum(1 for outcome in results.values() if outcome == "skipped"),
        listed_by_kind=kinds,
    )


# The inner run's pytest options (plugins off, how it reports). ``--tb=native``: pytest's own styles parse
# each failing frame's source with ast.parse, and on Python 3.11 that conversion keeps its depth count in one
# place for the whole interpreter. A job thread of the embedded worker formatting a traceback at the same moment
# (the traceback module parses the failing line for its carets) left that count off, and pytest's report died
# with "SystemError: AST constructor recursion depth mismatch": an INTERNALERROR that lost every test the
# process had left, and a second run of the whole suite. The native style formats with the traceback module,
# which on 3.11 ignores that error.
REPORTING_OPTIONS = ("-p", "no:cacheprovider", "-p", "no:django", "-p", "no:timeout", "--tb=native", "-q", "-rfE")


def run(tree: Path, report: Path, timeout: float) -> subprocess.CompletedProcess[str]:
    """Celery's two test modules in a pytest of their own, each process with a worker embedded in it."""
    import json
    import os

    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.settings_worker",
           "DJWORK_TEST_OVERRIDES": json.dumps({"RESULTS": True}), "DJWORK_CELERY_SUITE_TREE": str(tree),
           "PYTHONPATH": os.pathsep.join([str(tree), str(ROOT)])}
    # Three pytest processes, each with its own private Redis and embedded worker: most of the run waits on
    # results (some never come, until the per-test cap), not on a CPU. worksteal: a process that ran out of
    # tests takes half of what another still has queued (xdist's default "load" left two idle for minutes
    # while the third worked through its share behind the long chord tests).
    command = [sys.executable, "-m", "pytest", "-c", "pytest.ini", "--rootdir", ".", *REPORTING_OPTIONS,
               "-n", str(PROCESSES), "--dist", "worksteal", f"--junitxml={report}",
               *(f"t/integration/{name}" for name in TEST_FILES)]
    return subprocess.run(command, cwd=tree, env=env, capture_output=True, text=True, timeout=timeout)
