"""Dense peak TFLOPs of common training GPUs (half precision, no sparsity),
for MFU.  ``--gpu-peak`` overrides; ``--gpu NAME`` picks from this table."""
from __future__ import annotations

from typing import Optional

GPU_PEAK_TFLOPS: dict[str, float] = {
    "v100-16gb": 120.0,  # seed 001: "For v100 16gb gpus the max spec is 120 TFlops/sec"
    "v100": 125.0,
    "a100": 312.0,
    "a100-40gb": 312.0,
    "a10": 125.0,
    "a6000": 154.8,
    "l40s": 362.0,
    "h100": 989.0,
    "h100-pcie": 756.0,
    "h200": 989.0,
    "gh200": 989.0,
    "b200": 2250.0,
    "mi250x": 383.0,
    "mi300x": 1307.0,
    "max1550": 832.0,  # Intel Data Center GPU Max 1550 (Aurora), bf16
    "gaudi2": 432.0,
}


def peak_for(name: Optional[str]) -> Optional[float]:
    if not name:
        return None
    return GPU_PEAK_TFLOPS.get(name.strip().lower())
