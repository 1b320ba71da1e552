"""The ingest engine: complete lines, a block at a time, into events (see blocks)."""
