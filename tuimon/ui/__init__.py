"""The Textual app.  Only :mod:`tuimon.cli` imports this package."""
