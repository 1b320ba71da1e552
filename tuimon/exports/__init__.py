"""Exports: the figures in the formats fleet tools read (Prometheus/OpenMetrics)."""
