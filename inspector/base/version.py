"""The inspector's version: part of every compile-cache key, and what `doctor` reports."""
__version__ = "0.1.0"
