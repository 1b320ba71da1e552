"""Figures derived from the store: summaries, TFLOPs and MFU, GPU peaks, table renderings."""
