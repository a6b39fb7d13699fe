"""docs/logging.md's table of logger names is the set of names the code logs under.

Logger names are what users route in LOGGING: a module that moves keeps its logger's name
(the logger "djwork.key_guard" logs from djwork/redis/key_repair.py), and a rename in the code
or in the docs alone fails here. Reads the source; imports nothing.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_docs_logging_lists_every_logger_name():
    used: set[str] = set()
    for package in ("djwork", "djwork_dashboard"):
        for path in (ROOT / package).rglob("*.py"):
            used |= set(re.findall(r"getLogger\(\s*[\"']([\w.]+)[\"']", path.read_text(encoding="utf-8")))
    documented = (ROOT / "docs" / "logging.md").read_text(encoding="utf-8")
    table = set(re.findall(r"^\| `((?:djwork|celery)[\w.]*)` \|", documented, flags=re.MULTILINE))
    assert used and used == table, (f"logger names in the code but not in docs/logging.md's table: "
                                    f"{sorted(used - table)}; in the table but logged under by no code: "
                                    f"{sorted(table - used)}")
