"""The package version, in a leaf module: reading it imports nothing else of the package."""

__version__ = "0.1.0"  # keep in step with pyproject.toml's version (tests/test_layers.py checks)
