"""The "Keys" tables of docs/settings.md, rendered from djwork.settings.table.

Rewrite them after changing a setting (the rest of the doc is prose, kept as written)::

    python -m djwork.settings.doc docs/settings.md
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from djwork.settings.table import SETTINGS

KEYS_BEGIN = "<!-- The Keys tables are generated from djwork/settings/table.py: python -m djwork.settings.doc -->"
KEYS_END = "<!-- End of the generated Keys tables. -->"


def _literal(value: Any) -> str:
    """A default as a reader would write it in settings.py (strings in double quotes, as the doc's examples)."""
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, list):
        return "[" + ", ".join(_literal(item) for item in value) + "]"
    return repr(value)


def render_keys() -> str:
    """The "Keys" tables of docs/settings.md, one per section, in the table's order."""
    lines: list[str] = []
    for section in dict.fromkeys(spec.section for spec in SETTINGS):
        lines += [f"### {section}", "", "| Key | Default | Meaning | Checks |", "| --- | --- | --- | --- |"]
        for spec in SETTINGS:
            if spec.section == section:
                default = spec.doc_default or f"`{_literal(spec.default)}`"
                checks = ", ".join(check_id.removeprefix("djwork.") for check_id in (spec.check_id, *spec.also))
                lines.append(f"| `{spec.name}` | {default} | {spec.doc} | {checks} |")
        lines.append("")
    return "\n".join(lines) + "\n"


def with_keys_rendered(doc: str) -> str:
    """``doc`` with the text between the markers replaced by ``render_keys()``."""
    head, begin, rest = doc.partition(KEYS_BEGIN)
    _old, end, tail = rest.partition(KEYS_END)
    if not begin or not end:
        raise ValueError(f"the doc lacks the markers {KEYS_BEGIN!r} ... {KEYS_END!r}")
    return f"{head}{KEYS_BEGIN}\n{render_keys()}{KEYS_END}{tail}"


if __name__ == "__main__":
    target = Path(sys.argv[1] if len(sys.argv) > 1 else "docs/settings.md")
    target.write_text(with_keys_rendered(target.read_text(encoding="utf-8")), encoding="utf-8")
