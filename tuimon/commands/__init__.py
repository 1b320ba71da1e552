"""The commands: argument parsing, the batch verbs, the demo.  Only this package imports the UI."""
