"""Reading the JSON lines a running ``tuimon events --follow`` writes, as they come."""
from __future__ import annotations

import json
import os
import time


class EventStream:
    def __init__(self, stream) -> None:
        self.fd = stream.fileno()
        os.set_blocking(self.fd, False)
        self.buf = b""

    def read(self) -> list[dict]:
        """The complete lines written since the last call (none: an empty list)."""
        try:
            chunk = os.read(self.fd, 1 << 20)
        except BlockingIOError:
            return []
        self.buf += chunk
        *lines, self.buf = self.buf.split(b"\n")
        return [json.loads(text) for text in lines if text.strip()]

    def iterations_until(self, done, timeout: float, into: list) -> None:
        """Append (file, iteration) of iteration events to ``into`` until ``done()``."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and not done():
            docs = self.read()
            if not docs:
                time.sleep(0.05)
            into.extend((d["file"], d["iteration"]) for d in docs if d["type"] == "iteration")
