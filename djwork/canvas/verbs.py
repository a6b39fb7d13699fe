"""The canvas verbs of a job: ``task.s()``, ``.si()``, ``.signature()``, ``.map()``, ``.starmap()``, ``.chunks()``."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from djwork.canvas.chunks import chunks
from djwork.canvas.signature import XMAP, XSTARMAP, Signature


class CanvasVerbs:
    """``task.s()``, ``.si()``, ``.signature()``, ``.map()``, ``.starmap()``, ``.chunks()`` (mixed into jobs)."""

    name: str

    def signature_options(self) -> dict[str, Any]:
        return {}

    def s(self, *args: Any, **kwargs: Any) -> Signature:
        return Signature(self.name, args, kwargs, self.signature_options())

    def si(self, *args: Any, **kwargs: Any) -> Signature:
        return Signature(self.name, args, kwargs, self.signature_options(), immutable=True)

    def signature(self, args: Iterable[Any] | None = None, kwargs: dict[str, Any] | None = None,
                  immutable: bool = False, **options: Any) -> Signature:
        return Signature(self.name, args, kwargs, {**self.signature_options(), **options}, immutable)

    def map(self, items: Iterable[Any]) -> Signature:
        return Signature(XMAP, [self.name, list(items)], options=self.signature_options())

    def starmap(self, items: Iterable[Any]) -> Signature:
        return Signature(XSTARMAP, [self.name, [list(item) for item in items]], options=self.signature_options())

    def chunks(self, items: Iterable[Any], n: int) -> chunks:
        return chunks(self.name, items, n)
