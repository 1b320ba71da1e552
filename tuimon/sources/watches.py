"""inotify watches (through watchdog) on the followed directories: they only lower the
latency of noticing a change; polling stays the source of truth, so a watch that cannot
be had (the watch limit, a network filesystem) is simply not there."""
from __future__ import annotations

import os
from typing import Any, Callable, Optional

from .mounts import needs_polling


class Watches:
    def __init__(self, on_paths: Callable[[set[str]], None], enabled: bool = True) -> None:
        """``on_paths``: called from watchdog's thread with the paths an event names."""
        self.on_paths = on_paths
        self.enabled = enabled
        self._observer: Any = None
        self._watched: dict[str, object] = {}  # directory -> its watch (None: asked for, refused)

    def ensure(self, directory: str) -> bool:
        """Watch ``directory`` (recursively); True when a watch was asked for now."""
        if not self.enabled or directory in self._watched or needs_polling(directory):
            return False
        try:
            from watchdog.events import FileSystemEventHandler
            from watchdog.observers import Observer
        except ImportError:  # pragma: no cover - watchdog is a dependency
            self.enabled = False
            return False
        on_paths = self.on_paths

        class Handler(FileSystemEventHandler):
            def on_any_event(self, event) -> None:  # runs in watchdog's thread
                paths = {os.fsdecode(event.src_path)}
                if getattr(event, "dest_path", None):
                    paths.add(os.fsdecode(event.dest_path))
                on_paths(paths)

        try:
            if self._observer is None:
                self._observer = Observer()
                self._observer.daemon = True
                self._observer.start()
            self._watched[directory] = self._observer.schedule(Handler(), directory, recursive=True)
        except Exception:  # noqa: BLE001 - e.g. the inotify watch limit: polling still covers it
            self._watched[directory] = None
        return True

    def forget(self, directory: str) -> None:
        watch = self._watched.pop(directory, None)
        if watch is not None and self._observer is not None:
            try:
                self._observer.unschedule(watch)
            except Exception:  # noqa: BLE001 - watchdog's own cleanup; polling goes on
                pass

    def covers(self, directory: str) -> bool:
        """Whether a live watch holds ``directory``, on a local filesystem."""
        return any(w is not None and (directory == root or directory.startswith(root.rstrip(os.sep) + os.sep))
                   for root, w in self._watched.items()) and not needs_polling(directory)

    def stop(self) -> None:
        if self._observer is not None:
            try:
                self._observer.stop()
            except Exception:  # noqa: BLE001
                pass
            self._observer = None

    @property
    def observer(self) -> Optional[Any]:
        return self._observer
