"""Following logs live: the drivers that hand what the sources read (bytes and offsets of local files
and of files over SFTP) to the engine, keep each file's parser and parse-cache entry, and say what
happened to files (rotated, truncated, gone).  Above both ``sources/`` (bytes only) and ``engine/``."""
