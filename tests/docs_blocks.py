"""The code blocks of docs/*.md and README.md, with the marker that says how tests/test_docs_examples.py checks each.

A marker is an HTML comment on the line just before the block's opening fence
(a reader of the rendered page never sees it):

- none: a ``python`` block runs, a ``sh`` block's commands must exist, a ``json`` block must parse;
- ``<!-- not-run: why -->``: not runnable on its own (a settings or urls.py fragment, program output, a
  diagram); a ``python`` one must still compile, a ``sh`` one's commands must still exist;
- ``<!-- run: worker; settings {"RESULTS": true} -->``: runs, with a djwork worker running in the test
  process (for ``.get()``), and with those DJWORK settings (JSON) over the suite's own;
- ``<!-- run: continues -->``: runs after the page's previous runnable block, in its namespace (a block
  using the ``send_welcome`` or the ``import djwork`` of the one above, as a reader does).

A block of any other language (or none) must carry ``not-run``: otherwise nothing would check it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
FENCE = re.compile(r"^```(\S*)\s*$")
MARKER = re.compile(r"^<!--\s*(not-run|run)\s*:\s*(.*?)\s*-->\s*$")


@dataclass
class Block:
    path: Path
    line: int  # 1-based line of the opening fence
    language: str
    source: str
    marker: str | None = None  # "run" | "not-run" | None
    worker: bool = False
    continues: bool = False
    settings: dict[str, Any] = field(default_factory=dict)
    reason: str = ""

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"

    @property
    def runs(self) -> bool:
        return self.language == "python" and self.marker != "not-run"


def _parse_run_marker(block: Block, text: str) -> None:
    for part in filter(None, (piece.strip() for piece in text.split(";"))):
        if part == "worker":
            block.worker = True
        elif part == "continues":
            block.continues = True
        elif part.startswith("settings"):
            block.settings = json.loads(part[len("settings"):])
        else:
            raise ValueError(f"{block.where}: unknown run option {part!r} (worker; continues; settings {{...}})")


def blocks_of(path: Path) -> list[Block]:
    lines = path.read_text().split("\n")
    found: list[Block] = []
    index = 0
    while index < len(lines):
        opening = FENCE.match(lines[index])
        if not opening:
            index += 1
            continue
        start = index
        index += 1
        while index < len(lines) and not lines[index].startswith("```"):
            index += 1
        if index == len(lines):
            raise ValueError(f"{path.relative_to(ROOT)}:{start + 1}: a code block is never closed")
        block = Block(path, start + 1, opening.group(1), "\n".join(lines[start + 1:index]) + "\n")
        marker = MARKER.match(lines[start - 1]) if start else None
        if marker:
            block.marker, block.reason = marker.group(1), marker.group(2)
            if block.marker == "run":
                _parse_run_marker(block, block.reason)
        found.append(block)
        index += 1
    return found


def run_chain(block: Block, blocks: list[Block]) -> list[Block]:
    """``block`` and, if it continues, the page's runnable blocks before it that it builds on (first first)."""
    chain = [block]
    while chain[0].continues:
        earlier = [other for other in blocks
                   if other.path == block.path and other.line < chain[0].line and other.runs]
        if not earlier:
            raise ValueError(f"{chain[0].where}: 'continues', but no runnable block comes before it on its page")
        chain.insert(0, earlier[-1])
    return chain


def all_blocks() -> list[Block]:
    """Every block of README.md and docs/*.md, in file order: a page added later is checked too."""
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    return [block for page in pages for block in blocks_of(page)]
