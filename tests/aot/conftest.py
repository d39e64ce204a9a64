"""Shared setup for the AOT tests (helpers live in tests/aot/*.py, on sys.path here)."""
