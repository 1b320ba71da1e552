"""Textual stylesheets (.tcss) and Theme definitions for tuimon's app."""
from pathlib import Path

THEMES_DIR = Path(__file__).parent
