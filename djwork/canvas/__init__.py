"""Celery's canvas (signatures, chain, group, chord, map, starmap, chunks) on djwork's batches.

docs/canvas.md. Nothing here needs the celery package or a result backend.
"""

from djwork.canvas import plan  # noqa: F401 - fills signature.APPLY: applying a canvas works once this is imported
from djwork.canvas.refs import ChainRef, ChordRef, GroupRef
from djwork.canvas.signature import CanvasError, ChordError, Signature, chain, chord, chunks, group, signature

__all__ = ["CanvasError", "ChainRef", "ChordError", "ChordRef", "GroupRef", "Signature", "chain", "chord",
           "chunks", "group", "signature"]
