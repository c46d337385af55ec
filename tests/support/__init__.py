"""Helpers shared by the tests (on sys.path through pytest's pythonpath)."""
