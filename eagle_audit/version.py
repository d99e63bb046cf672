"""The package version, on the ground floor: every module may import it without importing the package root
(whose lazy exports reach the API)."""

__version__ = "0.1.0"
