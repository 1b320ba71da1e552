"""The job store: per-job, per-rank series in numpy, driven by the field registry.  No Textual here."""
