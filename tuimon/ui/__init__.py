"""The Textual app.  Only :mod:`tuimon.commands.cli` imports this package."""
