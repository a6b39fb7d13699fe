"""The built wheel carries lua/, templates/ and static/, and an installed copy finds them.

lua/, templates/ and static/ live at the repository root and reach the package
through the djwork/lua, djwork/templates and djwork/static symlinks. A working
checkout proves nothing about the wheel (the editable install reads the tree),
so this builds one, installs it into a fresh venv and runs from there.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import textwrap
import zipfile
from pathlib import Path

import pytest

from djwork import scripts

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("djwork", "djwork_dashboard")
# Not part of a source tree, and build/ or *.egg-info left over would leak stale files into the wheel.
NOT_SOURCE = shutil.ignore_patterns(".venv", ".git", "build", "dist", "*.egg-info", "__pycache__", "*.pyc",
                                    ".djwork", ".pytest_cache", ".ruff_cache", "test-artifacts", "node_modules")


WARNING = re.compile(r"warning|deprecat|absent from", re.IGNORECASE)


def run(command: list[str], **kwargs) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(command, capture_output=True, text=True, timeout=120, **kwargs)
    assert result.returncode == 0, (
        f"{' '.join(map(str, command))} exited {result.returncode}\n"
        f"stdout:\n{result.stdout[-4000:]}\nstderr:\n{result.stderr[-4000:]}"
    )
    return result


def clean_env() -> dict[str, str]:
    # The child must not inherit pytest's settings module, path or venv.
    env = {key: value for key, value in os.environ.items()
           if key not in ("PYTHONPATH", "PYTHONHOME", "DJANGO_SETTINGS_MODULE", "VIRTUAL_ENV", "PYTHONSTARTUP")}
    env["PYTHONNOUSERSITE"] = "1"
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


def files_under(directory: Path) -> list[Path]:
    return sorted(path for path in directory.rglob("*") if path.is_file() and "__pycache__" not in path.parts)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # Built from a copy: an in-place build writes build/ and *.egg-info into the
    # work tree, where concurrent runs would trip over each other.
    src = tmp_path_factory.mktemp("src") / "djwork"
    shutil.copytree(ROOT, src, symlinks=True, ignore=NOT_SOURCE)
    out = tmp_path_factory.mktemp("dist")
    # --no-isolation: setuptools and wheel come from the test extra, no download per run.
    # PYTHONDONTWRITEBYTECODE makes setuptools print "byte-compiling is disabled": the
    # environment's noise, not the project's, so the build runs without it.
    env = {key: value for key, value in clean_env().items() if key != "PYTHONDONTWRITEBYTECODE"}
    result = run([sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(out), str(src)],
                 env=env, cwd=out)
    # A deprecated pyproject key or a data directory missing from the package list is
    # only a warning today and a broken build tomorrow: the build must be warning-free.
    warnings = [line for line in (result.stdout + result.stderr).splitlines() if WARNING.search(line)]
    assert not warnings, "the wheel build printed warnings:\n" + "\n".join(warnings)
    wheels = list(out.glob("djwork-*.whl"))
    assert len(wheels) == 1, wheels
    return wheels[0]


@pytest.fixture(scope="module")
def wheel_names(wheel: Path) -> set[str]:
    with zipfile.ZipFile(wheel) as archive:
        return set(archive.namelist())


def test_wheel_carries_the_lua_scripts(wheel_names):
    scripts = [path for path in files_under(ROOT / "lua") if path.suffix == ".lua"]
    assert scripts, "lua/ has no scripts"
    for path in scripts:
        assert f"djwork/lua/{path.name}" in wheel_names


def test_wheel_carries_the_dashboard_templates(wheel_names):
    templates = files_under(ROOT / "templates")
    assert any(path.match("djwork_dashboard/*.html") for path in templates)
    for path in templates:
        assert f"djwork/templates/{path.relative_to(ROOT / 'templates').as_posix()}" in wheel_names


def test_wheel_carries_the_static_files(wheel_names):
    static = files_under(ROOT / "static")
    assert any(path.match("djwork_dashboard/*.css") for path in static)
    for path in static:
        assert f"djwork/static/{path.relative_to(ROOT / 'static').as_posix()}" in wheel_names


def test_wheel_carries_every_python_module(wheel_names):
    """A subpackage missing from pyproject's explicit `packages` list would silently not ship."""
    for package in PACKAGES:
        for path in files_under(ROOT / package):
            # The symlinked data directories are covered above and hold no code.
            if path.suffix == ".py" and path.relative_to(ROOT).parts[1] not in ("lua", "templates", "static"):
                assert path.relative_to(ROOT).as_posix() in wheel_names


def test_wheel_carries_the_license(wheel_names):
    assert any(name.endswith(".dist-info/licenses/LICENSE") for name in wheel_names), sorted(wheel_names)


def test_wheel_ships_only_the_two_packages(wheel_names):
    top_level = {name.split("/", 1)[0] for name in wheel_names}
    dist_info = {name for name in top_level if name.endswith(".dist-info")}
    assert len(dist_info) == 1
    assert top_level - dist_info == set(PACKAGES)


PROBE = textwrap.dedent("""
    import json, os, sys
    # The main venv only supplies Django, redis and the other dependencies; it
    # comes last, and as plain path entries (no .pth files), so its editable
    # djwork can't shadow the installed one.
    sys.path.extend(sys.argv[1:])

    import django
    from django.conf import settings

    settings.configure(
        INSTALLED_APPS=["djwork", "djwork_dashboard"],
        TEMPLATES=[{"BACKEND": "django.template.backends.django.DjangoTemplates", "APP_DIRS": True}],
        DJWORK={"REDIS_URL": "redis://127.0.0.1:1/0"},  # never dialled
        USE_TZ=True,
    )
    django.setup()

    import djwork
    import djwork_dashboard
    from django.template.loader import get_template
    from djwork import scripts

    print(json.dumps({
        "djwork": djwork.__file__,
        "djwork_dashboard": djwork_dashboard.__file__,
        "script_directory": str(scripts.script_directory()),
        "beat": scripts.source("beat"),
        "script_names": scripts.names(),
        "template": get_template("djwork_dashboard/overview.html").origin.name,
        "sys_path": [os.path.realpath(entry) for entry in sys.path],
    }))
""")


def test_installed_wheel_finds_its_scripts_and_templates(wheel, tmp_path):
    venv = tmp_path / "venv"
    run([sys.executable, "-m", "venv", "--without-pip", str(venv)], env=clean_env())
    python = venv / "bin" / "python"
    # This venv's pip installs into the fresh one: no ensurepip, no index, no dependencies.
    run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "--no-index", str(wheel)],
        env=clean_env())
    main_site = list(dict.fromkeys([sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]]))
    cwd = tmp_path / "elsewhere"  # not the repository, so '' on sys.path finds no djwork
    cwd.mkdir()
    result = run([str(python), "-c", PROBE, *main_site], cwd=cwd, env=clean_env())
    found = json.loads(result.stdout.strip().splitlines()[-1])

    venv_root = venv.resolve()

    def inside_venv(path: str) -> bool:
        return Path(path).resolve().is_relative_to(venv_root)

    assert inside_venv(found["djwork"]), found
    assert inside_venv(found["djwork_dashboard"]), found
    assert inside_venv(found["script_directory"]), found
    # The repository's script as Redis gets it, its library (lua/clock_lib.lua) included: the wheel carries both.
    assert found["beat"] == scripts.source("beat") and "local function clock_now()" in found["beat"]
    assert found["script_names"] == sorted(path.stem for path in (ROOT / "lua").glob("*.lua"))
    assert inside_venv(found["template"]), found
    assert Path(found["template"]).as_posix().endswith("djwork/templates/djwork_dashboard/overview.html")
    assert str(ROOT) not in found["sys_path"], found["sys_path"]
