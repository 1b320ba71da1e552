"""The batch commands' allocator tuning: freed 1 MB blocks are reused instead of
faulted in again page by page (see tuimon.engine.alloc)."""
from __future__ import annotations

import subprocess
import sys

import pytest

PATTERN = r"""
import resource, sys
from tuimon.engine.alloc import keep_freed_memory
if sys.argv[1] == "tuned" and not keep_freed_memory():
    print("unsupported"); raise SystemExit
def block():  # what a parse does each block: several 1 MB objects, then all freed
    held = [b"x" * (1 << 20) for _ in range(6)]
    del held
for _ in range(3):
    block()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(20):
    block()
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def faults(mode: str) -> str:
    return subprocess.run([sys.executable, "-c", PATTERN, mode], capture_output=True, text=True,
                          check=True).stdout.strip()


def test_freed_blocks_are_reused_without_page_faults():
    tuned = faults("tuned")
    if tuned == "unsupported":
        pytest.skip("SKIPPED LOUDLY: this libc has no mallopt to tune (not glibc): nothing to check")
    plain = int(faults("plain"))
    if plain < 5_000:
        pytest.skip(f"SKIPPED LOUDLY: this libc reuses freed blocks untuned ({plain} faults): nothing to compare")
    assert int(tuned) < plain / 20, (tuned, plain)  # 120 MB allocated: about 30,000 faults untuned, none tuned
