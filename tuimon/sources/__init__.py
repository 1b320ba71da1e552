"""Where bytes come from: files on disk (and, later, over SSH), and how they are framed."""
