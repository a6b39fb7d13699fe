"""Celery's canvas (signatures, chain, group, chord, map, starmap, chunks) on djwork's batches.

docs/canvas.md. Nothing here needs the celery package or a result backend.
"""

from djwork.canvas import apply, eager_canvas, replace, stream  # noqa: F401 - fill signature.APPLY and the task hooks
from djwork.canvas.chunks import chunks
from djwork.canvas.refs import ChainRef, ChordRef, GroupRef
from djwork.canvas.result_set import ResultSet
from djwork.canvas.shapes import chain, chord, group
from djwork.canvas.signature import CanvasError, ChordError, Signature, signature

GroupResult = GroupRef  # Celery's name for what a group returns

__all__ = ["CanvasError", "ChainRef", "ChordError", "ChordRef", "GroupRef", "GroupResult", "ResultSet", "Signature",
           "chain", "chord", "chunks", "group", "signature"]
