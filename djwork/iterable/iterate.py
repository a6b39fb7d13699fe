"""Ready-made iterators for ``IterableJob.build_iterator``: each takes the saved cursor and yields
``(item, cursor)`` pairs starting just after it (docs/iterable.md, Ready-made iterators).

    def build_iterator(self, cursor):
        return djwork.iterate.queryset(Order.objects.filter(paid=True), cursor)
"""

from __future__ import annotations

import csv
import itertools
from collections.abc import Iterable, Iterator, Sequence
from typing import Any


def queryset(rows: Any, cursor: Any = None, *, chunk_size: int = 500) -> Iterator[tuple[Any, Any]]:
    """A Django QuerySet walked by primary key, ``chunk_size`` rows a query; the cursor is the last pk done.

    Each query asks for rows with a pk above the last one (``pk__gt``, ordered by pk), never an
    OFFSET: a query deep in a big table costs what the first one does, and a row added or deleted
    behind the cursor shifts nothing. The queryset's own ordering is replaced by the pk's.
    """
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be at least 1, got {chunk_size!r}")
    ordered = rows.order_by("pk")
    while True:
        page = ordered if cursor is None else ordered.filter(pk__gt=cursor)
        chunk = list(page[:chunk_size])
        for row in chunk:
            cursor = row.pk
            yield row, cursor
        if len(chunk) < chunk_size:
            return


def numbers(start: int, stop: int, cursor: int | None = None, step: int = 1) -> Iterator[tuple[int, int]]:
    """The integers of ``range(start, stop, step)``; the cursor is the last one done."""
    if step == 0:
        raise ValueError("step must not be zero")
    first = start if cursor is None else cursor + step
    for number in range(first, stop, step):
        yield number, number


def items(values: Sequence[Any], cursor: int | None = None) -> Iterator[tuple[Any, int]]:
    """The items of a list (a sequence whose order is stable across runs); the cursor is the last index done."""
    first = 0 if cursor is None else cursor + 1
    for index in range(first, len(values)):
        yield values[index], index


def lines(path: str, cursor: int | None = None, *, encoding: str = "utf-8") -> Iterator[tuple[str, int]]:
    """The lines of a text file, newline stripped; the cursor is the byte offset just after the last line done.

    A byte offset, not a line number, so a resumed segment seeks straight to it instead of re-reading
    the file from the top.
    """
    with open(path, "rb") as handle:
        if cursor:
            handle.seek(cursor)
        for raw in iter(handle.readline, b""):
            yield raw.decode(encoding).rstrip("\r\n"), handle.tell()


def csv_rows(path: str, cursor: int | None = None, *, encoding: str = "utf-8",
             **reader_options: Any) -> Iterator[tuple[list[str], int]]:
    """The rows of a CSV file (``csv.reader``'s options pass through); the cursor is the row number done.

    A row number, not an offset: a quoted field may span lines, so only the reader knows where a row
    ends; a resumed segment reads past the rows done without handing them to ``each``.
    """
    done = 0 if cursor is None else cursor + 1
    with open(path, newline="", encoding=encoding) as handle:
        rows = csv.reader(handle, **reader_options)
        for number, row in enumerate(itertools.islice(rows, done, None), start=done):
            yield row, number


def batches(pairs: Iterable[tuple[Any, Any]], size: int) -> Iterator[tuple[list[Any], Any]]:
    """Any of these iterators in lists of up to ``size`` items: ``each`` receives a list, and the cursor
    is the last item's, saved only between lists."""
    if size < 1:
        raise ValueError(f"size must be at least 1, got {size!r}")
    chunk: list[Any] = []
    cursor = None
    for item, cursor in pairs:
        chunk.append(item)
        if len(chunk) == size:
            yield chunk, cursor
            chunk = []
    if chunk:
        yield chunk, cursor
