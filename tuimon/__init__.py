"""tuimon: live terminal monitor for distributed deep-learning training logs."""
__version__ = "0.1.0"
