"""Growable numpy series of iteration points, 28 bytes a point.

Wall time is stored as float32 seconds after the series' first stamp (about 0.25 s
resolution after a month), which is what keeps a point under 32 bytes; growth by
1/8 keeps the allocated slack under 4 bytes a point.
"""
from __future__ import annotations

from typing import Optional, Sequence

import numpy as np

POINT_DTYPE = np.dtype([
    ("iteration", "<i4"),
    ("elapsed_ms", "<f4"),
    ("loss", "<f4"),
    ("grad_norm", "<f4"),
    ("tflops", "<f4"),
    ("samples_per_sec", "<f4"),
    ("wall", "<f4"),
])
_NAN = float("nan")
_I32_MAX = np.iinfo(np.int32).max


def _f(value: Optional[float]) -> float:
    """float32-safe value: huge magnitudes become +-inf instead of an overflow warning."""
    if value is None:
        return _NAN
    try:
        v = float(value)
    except (OverflowError, ValueError, TypeError):
        return _NAN
    if v > 3.4e38:
        return float("inf")
    if v < -3.4e38:
        return float("-inf")
    return v


def _f64(values: Sequence) -> np.ndarray:
    try:
        return np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError, OverflowError):
        return np.array([_f64_one(v) for v in values], dtype=np.float64)


def _f64_one(value) -> float:
    if value is None:
        return _NAN
    try:
        return float(value)
    except (OverflowError, ValueError, TypeError):
        return _NAN


def _clamp(values: np.ndarray) -> np.ndarray:
    """What :func:`_f` does to one value, to an array (float32-safe)."""
    values = values.copy() if values.base is not None else values
    values[values > 3.4e38] = np.inf
    values[values < -3.4e38] = -np.inf
    return values


def _f32(values: Optional[Sequence]):
    if values is None:
        return _NAN
    return _clamp(_f64(values))


def _ints(values: Sequence[Optional[int]]) -> np.ndarray:
    try:
        return np.asarray(values, dtype=np.int64).copy()
    except (TypeError, ValueError, OverflowError):
        return np.array([v if v is not None and -(2 ** 62) < v < 2 ** 62 else -1 for v in values], dtype=np.int64)


class Series:
    __slots__ = ("_data", "n", "wall_base")

    def __init__(self, capacity: int = 64) -> None:
        self._data = np.empty(capacity, dtype=POINT_DTYPE)
        self.n = 0
        self.wall_base: Optional[float] = None

    def __len__(self) -> int:
        return self.n

    def append(self, iteration: Optional[int], elapsed_ms: Optional[float] = None, loss: Optional[float] = None,
               grad_norm: Optional[float] = None, tflops: Optional[float] = None,
               samples_per_sec: Optional[float] = None, wall: Optional[float] = None) -> None:
        if self.n == len(self._data):
            self._grow(len(self._data) + max(64, len(self._data) // 8))
        if wall is not None and self.wall_base is None:
            self.wall_base = wall
        it = iteration if iteration is not None and 0 <= iteration <= _I32_MAX else -1
        rel = (wall - self.wall_base) if wall is not None and self.wall_base is not None else None
        self._data[self.n] = (it, _f(elapsed_ms), _f(loss), _f(grad_norm), _f(tflops), _f(samples_per_sec), _f(rel))
        self.n += 1

    def extend(self, iterations: Sequence[Optional[int]], elapsed_ms: Optional[Sequence] = None,
               loss: Optional[Sequence] = None, grad_norm: Optional[Sequence] = None,
               tflops: Optional[Sequence] = None, samples_per_sec: Optional[Sequence] = None,
               wall: Optional[Sequence] = None) -> None:
        """:meth:`append` of many points at once (columns of equal length; None: absent)."""
        k = len(iterations)
        if not k:
            return
        if self.n + k > len(self._data):
            size = len(self._data)
            self._grow(max(self.n + k, size + max(64, size // 8)))
        its = _ints(iterations)
        its[(its < 0) | (its > _I32_MAX)] = -1
        out = self._data[self.n:self.n + k]
        out["iteration"] = its
        for name, values in (("elapsed_ms", elapsed_ms), ("loss", loss), ("grad_norm", grad_norm),
                             ("tflops", tflops), ("samples_per_sec", samples_per_sec)):
            out[name] = _f32(values)
        if wall is not None:
            walls = _f64(wall)
            if self.wall_base is None:
                known = np.flatnonzero(~np.isnan(walls))
                if known.size:
                    self.wall_base = float(walls[known[0]])
            out["wall"] = _clamp(walls - self.wall_base) if self.wall_base is not None else _NAN
        else:
            out["wall"] = _NAN
        self.n += k

    def _grow(self, capacity: int) -> None:
        # np.resize would fill the new room with copies of the data: only the points are copied
        # copied as bytes: a copy field by field of the structured points runs ten times slower
        data = np.empty(capacity, dtype=POINT_DTYPE)
        data.view(np.uint8)[:self.n * POINT_DTYPE.itemsize] = self._data.view(np.uint8)[:self.n * POINT_DTYPE.itemsize]
        self._data = data

    def set_last(self, column: str, value: Optional[float]) -> None:
        if self.n:
            self._data[column][self.n - 1] = _f(value)

    @property
    def points(self) -> np.ndarray:
        """Read-only view of the stored points."""
        view = self._data[: self.n]
        view.flags.writeable = False
        return view

    def column(self, name: str) -> np.ndarray:
        return self._data[name][: self.n]

    def last(self, name: str) -> Optional[float]:
        if not self.n:
            return None
        value = self._data[name][self.n - 1]
        return float(value)

    @property
    def bytes_allocated(self) -> int:
        return int(self._data.nbytes)
