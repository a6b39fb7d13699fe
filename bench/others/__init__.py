"""Job definitions and a client driver for the other job systems bench/compare.py measures.

None of rq, celery or dramatiq is a djwork dependency: compare.py skips each one
that is not importable. Nothing here is imported by djwork itself.
"""
