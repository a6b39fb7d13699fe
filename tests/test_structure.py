"""The shape of the code base, checked by reading the source (no Redis; only djwork.redis.keys is imported).

- no import cycle among djwork's and djwork_dashboard's modules, counting every
  import statement (module level, inside functions, under ``if TYPE_CHECKING:``);
- no module in djwork/ longer than 400 lines;
- djwork_dashboard imports nothing from redis-py (djwork.api raises its own errors), imports of djwork only
  djwork.api and a small listed surface, and reaches no module that talks to Redis but through djwork.api;
- djwork/client/__init__.py imports only its listed modules: features attach to a push as hooks
  (djwork/client/push_hooks.py);
- the repository stands alone: no citation of documents or code a reader of it can't open;
- docs/keys.md lists every key djwork/redis/keys.py names;
- what runs a job (the Executor, a coroutine job, the hook interface) imports no feature: features attach
  through run hooks (docs/hooks.md).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("djwork", "djwork_dashboard")
MAX_MODULE_LINES = 400


def _python_files(package: str) -> Iterator[Path]:
    for path in sorted((ROOT / package).rglob("*.py")):
        if "__pycache__" not in path.parts:
            yield path


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES: dict[str, Path] = {_module_name(path): path for package in PACKAGES for path in _python_files(package)}


@dataclass(frozen=True)
class ImportEdge:
    importer: str
    imported: str
    line: int

    def __str__(self) -> str:
        return f"{self.importer} imports {self.imported} ({self.importer_path}:{self.line})"

    @property
    def importer_path(self) -> str:
        return MODULES[self.importer].relative_to(ROOT).as_posix()


def _internal_target(dotted: str) -> str | None:
    """The djwork module a dotted name lands in: itself if a module, else the nearest enclosing module."""
    parts = dotted.split(".")
    while parts:
        candidate = ".".join(parts)
        if candidate in MODULES:
            return candidate
        parts.pop()
    return None


def _package_of(module: str) -> str:
    """The package a module's relative imports start from: itself for a package's __init__."""
    return module if MODULES[module].name == "__init__.py" else module.rpartition(".")[0]


def imports_of(module: str) -> list[ImportEdge]:
    """Every djwork module ``module`` imports, wherever the import statement sits.

    ``from package import name`` is an edge to the submodule ``package.name``
    when there is one (``from djwork import redis as redis_layer`` is
    djwork.redis), else to the package's __init__ (``from djwork import job``).
    Parent packages Python initialises on the way are not edges: counting them
    would make every ``from djwork import keys`` depend on whatever
    djwork/__init__.py re-exports, and report cycles no import order can hit.
    """
    tree = ast.parse(MODULES[module].read_text(encoding="utf-8"), filename=str(MODULES[module]))
    edges: list[ImportEdge] = []
    for node in ast.walk(tree):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = _package_of(module)
                for _ in range(node.level - 1):
                    base = base.rpartition(".")[0]
                source = f"{base}.{node.module}" if node.module else base
            else:
                source = node.module or ""
            targets = [f"{source}.{alias.name}" if f"{source}.{alias.name}" in MODULES else source
                       for alias in node.names]
        for target in targets:
            resolved = _internal_target(target)
            if resolved is not None and resolved != module:
                edges.append(ImportEdge(module, resolved, node.lineno))
    return edges


def import_graph() -> dict[str, dict[str, ImportEdge]]:
    graph: dict[str, dict[str, ImportEdge]] = {module: {} for module in MODULES}
    for module in MODULES:
        for edge in imports_of(module):
            graph[module].setdefault(edge.imported, edge)
    return graph


def strongly_connected(graph: dict[str, dict[str, ImportEdge]]) -> list[list[str]]:
    """Tarjan's algorithm: the groups of modules that import one another, directly or not."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for successor in graph[node]:
            if successor not in index:
                visit(successor)
                low[node] = min(low[node], low[successor])
            elif successor in on_stack:
                low[node] = min(low[node], index[successor])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return groups


def one_cycle(graph: dict[str, dict[str, ImportEdge]], group: list[str]) -> list[ImportEdge]:
    """A shortest cycle through the group's first module, as the import statements that make it."""
    members = set(group)
    start = group[0]
    came_from: dict[str, ImportEdge] = {}
    frontier = [start]
    while frontier:
        next_frontier = []
        for node in frontier:
            for successor, edge in sorted(graph[node].items()):
                if successor not in members:
                    continue
                if successor == start:
                    path = [edge]
                    while path[0].importer != start:
                        path.insert(0, came_from[path[0].importer])
                    return path
                if successor not in came_from:
                    came_from[successor] = edge
                    next_frontier.append(successor)
        frontier = next_frontier
    raise AssertionError(f"{group} is strongly connected but no cycle through {start} was found")


def test_the_walker_resolves_submodules_packages_and_relative_imports():
    # Guards the guard: an import the walker failed to see would hide a cycle.
    edges = {edge.imported for edge in imports_of("djwork.client")}
    assert {"djwork.redis.keys", "djwork.redis", "djwork.settings.conf", "djwork.payload"} <= edges, edges
    assert "djwork" not in edges  # `from djwork import keys` is djwork.redis.keys, not the package
    assert {edge.imported for edge in imports_of("djwork")} >= {"djwork.jobs", "djwork.payload"}
    relative = [module for module in MODULES
                if any(isinstance(node, ast.ImportFrom) and node.level
                       for node in ast.walk(ast.parse(MODULES[module].read_text(encoding="utf-8"))))]
    for module in relative:
        assert imports_of(module), f"{module} has relative imports the walker resolved to nothing"


def test_no_import_cycle_among_djwork_modules():
    graph = import_graph()
    cycles = []
    for group in strongly_connected(graph):
        path = one_cycle(graph, group)
        chain = " -> ".join([path[0].importer, *(edge.imported for edge in path)])
        cycles.append(f"{chain}\n      " + "\n      ".join(str(edge) for edge in path)
                      + (f"\n      (all of {', '.join(group)} import one another)" if len(group) > len(path) else ""))
    assert not cycles, "import cycles (TYPE_CHECKING and function-level imports count):\n  " + "\n  ".join(cycles)


def test_no_module_in_djwork_is_over_400_lines():
    too_long = {
        MODULES[module].relative_to(ROOT).as_posix(): len(MODULES[module].read_text(encoding="utf-8").splitlines())
        for module in MODULES if module.split(".")[0] == "djwork"
    }
    too_long = {path: lines for path, lines in too_long.items() if lines > MAX_MODULE_LINES}
    assert not too_long, f"modules over {MAX_MODULE_LINES} lines (split them by job): " + ", ".join(
        f"{path} ({lines})" for path, lines in sorted(too_long.items(), key=lambda item: -item[1]))


def test_the_dashboard_imports_nothing_from_redis_py():
    found = []
    for module, path in MODULES.items():
        if not module.startswith("djwork_dashboard"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = ([alias.name for alias in node.names] if isinstance(node, ast.Import) else
                     [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
            found += [f"{path.relative_to(ROOT).as_posix()}:{node.lineno} imports {name}"
                      for name in names if name == "redis" or name.startswith("redis.")]
    assert not found, "the dashboard must catch djwork.api's errors, not redis-py's:\n  " + "\n  ".join(found)


# Documents and code outside this repository: a reader can open none of them.
OUTSIDE_CITATIONS = re.compile(r"shared/|WIRE\.md|DESIGN\.md|STYLE-ANCHORS|\bseeds? 00\d|\bwurk\b|\bcogworker\b")
STANDALONE_PLACES = ("djwork", "djwork_dashboard", "lua", "docs", "README.md")


def test_the_repository_cites_nothing_outside_itself():
    found = []
    for place in STANDALONE_PLACES:
        top = ROOT / place
        paths = [top] if top.is_file() else sorted(top.rglob("*"))
        for path in paths:
            # Compiled caches repeat old docstrings; a symlinked directory (djwork/lua) is read where it lives.
            inside = path.relative_to(ROOT)
            if "__pycache__" in inside.parts or not path.is_file() or any(
                    (ROOT / part).is_symlink() for part in [inside, *inside.parents]):
                continue
            content = path.read_text(encoding="utf-8", errors="replace")
            for number, line in enumerate(content.splitlines(), start=1):
                if OUTSIDE_CITATIONS.search(line):
                    found.append(f"{path.relative_to(ROOT).as_posix()}:{number}: {line.strip()[:140]}")
    assert not found, (
        "citations of documents outside the repository (keep the why, drop the provenance; "
        "Sidekiq's data model is in docs/wire.md):\n  " + "\n  ".join(found)
    )


def test_docs_keys_lists_every_key_named_in_keys_py():
    # keys.py says docs/keys.md mirrors it: a key added to one and not the other fails here.
    from djwork.redis import keys

    documented = (ROOT / "docs" / "keys.md").read_text(encoding="utf-8")
    names = {name: value for name, value in vars(keys).items() if name.isupper() and isinstance(value, str)}
    missing = [f"{name} = {value!r}" for name, value in sorted(names.items()) if f"`{value}" not in documented]
    assert names and not missing, f"keys in djwork/redis/keys.py that docs/keys.md does not list: {missing}"


# What runs a job may import: the job model, the Redis layer and filing, the retry rules, the hook interface.
# A feature's run-time part is a RunHook in its own module, registered in djwork/worker/installed_hooks.py.
RUN_CORE_IMPORTS = {
    "djwork.worker.execution": {
        "djwork.settings.conf", "djwork.dead", "djwork.jobs", "djwork.redis.key_repair", "djwork.redis.key_types",
        "djwork.redis.keys",
        "djwork.payload", "djwork.redis", "djwork.tasks_compat", "djwork.worker.acks",
        "djwork.worker.coroutine_jobs", "djwork.worker.failure_log", "djwork.worker.fetch",
        "djwork.worker.process", "djwork.worker.retry", "djwork.worker.run_hooks",
    },
    "djwork.worker.coroutine_jobs": {"djwork.worker.process", "djwork.worker.run_hooks"},
    "djwork.worker.run_hooks": {
        "djwork.settings.conf", "djwork.jobs.task_class", "djwork.worker.acks", "djwork.worker.fetch",
        "djwork.worker.retry",
    },
}


def test_what_runs_a_job_imports_no_feature():
    strays = [str(edge) for module, allowed in RUN_CORE_IMPORTS.items()
              for edge in imports_of(module) if edge.imported not in allowed]
    assert not strays, ("the code that runs a job names a feature; make it a RunHook in the feature's own "
                        "module, registered in djwork/worker/installed_hooks.py (docs/hooks.md):\n  "
                        + "\n  ".join(strays))


# --- seams: the client names no feature; the dashboard reaches Redis only through djwork.api -------------
# What djwork/client/__init__.py may import: the Redis layer, the wire format, settings, the user's middleware and the
# hook seam. A feature (batches, unique jobs, testing modes, Celery's signals) takes part in a push as a hook
# listed in djwork/client/push_hooks.py; importing it here would put it back in the client.
CLIENT_IMPORTS = {
    "djwork.settings.conf", "djwork.exceptions", "djwork.redis.key_reports", "djwork.redis.key_types",
    "djwork.redis.keys", "djwork.redis.lanes", "djwork.middleware",
    "djwork.payload", "djwork.client.push_hooks", "djwork.redis", "djwork.redis.url", "djwork.redis.scripts",
}


def test_the_client_imports_no_feature():
    found = [str(edge) for edge in imports_of("djwork.client") if edge.imported not in CLIENT_IMPORTS]
    assert not found, ("djwork/client/__init__.py imports outside its list (a feature attaches as a hook in "
                       "djwork/client/push_hooks.py FEATURES):\n  " + "\n  ".join(found))
    # The seam itself names no feature (it resolves FEATURES by dotted path): else every feature imports it
    # and it imports every feature.
    assert not imports_of("djwork.client.push_hooks"), imports_of("djwork.client.push_hooks")


def _is_api(module: str) -> bool:
    return module == "djwork.api" or module.startswith("djwork.api.")


# What the dashboard may import of djwork besides djwork.api, and why; neither reaches Redis but through
# djwork.api (the next test checks that).
DASHBOARD_SURFACE = {
    "djwork.settings.conf": "the DJWORK settings: the health strip's thresholds, the metrics token",
    "djwork.metrics.prometheus": "the Prometheus text the /metrics view serves: a reader of djwork.api, which keeps "
                         "prometheus_client out of every djwork.api import",
}


def _imports_redis_py(module: str) -> bool:
    for node in ast.walk(ast.parse(MODULES[module].read_text(encoding="utf-8"))):
        names = ([alias.name for alias in node.names] if isinstance(node, ast.Import) else
                 [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
        if any(name == "redis" or name.startswith("redis.") for name in names):
            return True
    return False


def test_the_dashboard_imports_of_djwork_only_its_api_and_a_small_surface():
    found = [f"{edge} (not djwork.api, nor one of {sorted(DASHBOARD_SURFACE)})"
             for module in MODULES if module.startswith("djwork_dashboard")
             for edge in imports_of(module)
             if not edge.imported.startswith("djwork_dashboard") and not _is_api(edge.imported)
             and edge.imported not in DASHBOARD_SURFACE]
    assert not found, "add what the dashboard needs to djwork.api:\n  " + "\n  ".join(found)


def test_the_dashboard_reaches_the_redis_layer_only_through_djwork_api():
    # Walk every import from the dashboard, stopping at djwork.api: no module on the way may talk to Redis
    # (import redis-py) itself. djwork.redis.url, imported once for the footer, reached djwork.redis.connections.
    graph = import_graph()
    seen: dict[str, str] = {}
    frontier = [(edge.imported, f"{edge}") for module in MODULES if module.startswith("djwork_dashboard")
                for edge in graph[module].values()]
    while frontier:
        module, path = frontier.pop()
        if _is_api(module) or module in seen:
            continue
        seen[module] = path
        frontier += [(target, f"{path}\n      {edge}") for target, edge in graph[module].items()]
    found = [f"{module}, reached by:\n      {path}" for module, path in sorted(seen.items())
             if not module.startswith("djwork_dashboard") and _imports_redis_py(module)]
    assert not found, "the dashboard reaches Redis other than through djwork.api:\n  " + "\n  ".join(found)


def test_no_test_module_imports_another():
    # A test module imported by another runs its module-level code twice and drags its fixtures along (the
    # F811 redefinitions this suite once had): what tests share lives in tests/support/ or a helpers module.
    found = []
    for path in sorted((ROOT / "tests").rglob("test_*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = ([alias.name for alias in node.names] if isinstance(node, ast.Import)
                     else [f"{node.module}.{alias.name}" for alias in node.names]
                     if isinstance(node, ast.ImportFrom) and node.module else [])
            found += [f"{path.relative_to(ROOT).as_posix()}:{node.lineno} imports {name}"
                      for name in names if re.search(r"(^|\.)test_\w+", name.removeprefix("tests."))]
    assert not found, "test modules importing test modules:\n  " + "\n  ".join(found)
