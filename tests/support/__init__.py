"""Helpers shared by test modules (never a test module itself): import from here, not from another test file."""
