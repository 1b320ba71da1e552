"""A real writer process for follow tests: applies file operations read as JSON
lines on stdin, answering "ok" after each, and keeps its file descriptors open
between writes the way a training process does."""
from __future__ import annotations

import json
import os
import shutil
import sys

fds: dict[str, object] = {}


def handle(op: dict) -> None:
    kind = op["op"]
    path = op.get("path")
    if kind == "write":
        fh = fds.get(path)
        if fh is None:
            fh = fds[path] = open(path, "ab" if op.get("append", True) else "wb", buffering=0)
        fh.write(bytes.fromhex(op["hex"]))
    elif kind == "close":
        fh = fds.pop(path, None)
        if fh is not None:
            fh.close()
    elif kind == "rename":
        os.rename(path, op["to"])
    elif kind == "truncate":
        os.truncate(path, op.get("size", 0))
    elif kind == "copytruncate":
        shutil.copyfile(path, op["to"])
        os.truncate(path, 0)
    elif kind == "unlink":
        os.unlink(path)
    elif kind == "symlink":
        tmp = path + ".tmp-link"
        os.symlink(op["target"], tmp)
        os.replace(tmp, path)
    elif kind == "mkdir":
        os.makedirs(path, exist_ok=True)
    elif kind == "rmtree":
        for p in [p for p in fds if p.startswith(path)]:
            fds.pop(p).close()
        shutil.rmtree(path)
    elif kind == "chmod":
        os.chmod(path, int(op["mode"], 8))
    elif kind == "shift":  # logrotate's numbered rotation: x.2 -> x.3, x.1 -> x.2, x -> x.1
        fh = fds.pop(path, None)
        if fh is not None:
            fh.close()
        for k in range(int(op.get("keep", 5)) - 1, 0, -1):
            if os.path.exists(f"{path}.{k}"):
                os.rename(f"{path}.{k}", f"{path}.{k + 1}")
        os.rename(path, f"{path}.1")
    elif kind == "mkfifo":
        os.mkfifo(path)
    elif kind == "link":
        os.symlink(op["target"], path)
    else:
        raise ValueError(kind)


for line in sys.stdin:
    handle(json.loads(line))
    sys.stdout.write("ok\n")
    sys.stdout.flush()
