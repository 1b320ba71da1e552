"""Peak dense TFLOPs of common training GPUs per precision, for MFU.

Figures are the vendors' dense (no sparsity) tensor-core peaks of the SXM/OAM parts.
A run's precision comes from its arguments (``bf16``/``fp16``; fp32 runs are judged
against the TF32 peak where the GPU has one: the larger peak, so the MFU is never
flattered).  ``--gpu-peak`` and ``--gpu`` override what the logs say.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional

#: GPU -> precision -> peak dense TFLOPs per GPU
GPU_PEAKS: dict[str, dict[str, float]] = {
    "v100-16gb": {"fp16": 120.0, "fp32": 15.0},  # seed 001: "For v100 16gb gpus the max spec is 120 TFlops/sec"
    "v100": {"fp16": 125.0, "fp32": 15.7},
    "a100": {"bf16": 312.0, "fp16": 312.0, "tf32": 156.0, "fp32": 19.5},
    "a100-40gb": {"bf16": 312.0, "fp16": 312.0, "tf32": 156.0, "fp32": 19.5},
    "a10": {"bf16": 125.0, "fp16": 125.0, "tf32": 62.5, "fp32": 31.2},
    "a6000": {"bf16": 154.8, "fp16": 154.8, "tf32": 77.4, "fp32": 38.7},
    "l40s": {"bf16": 362.0, "fp16": 362.0, "tf32": 183.0, "fp32": 91.6},
    "h100": {"bf16": 989.0, "fp16": 989.0, "tf32": 494.5, "fp32": 67.0},
    "h100-pcie": {"bf16": 756.0, "fp16": 756.0, "tf32": 378.0, "fp32": 51.0},
    "h200": {"bf16": 989.0, "fp16": 989.0, "tf32": 494.5, "fp32": 67.0},
    "gh200": {"bf16": 989.0, "fp16": 989.0, "tf32": 494.5, "fp32": 67.0},
    "b200": {"bf16": 2250.0, "fp16": 2250.0, "tf32": 1100.0, "fp32": 80.0},
    "mi250x": {"bf16": 383.0, "fp16": 383.0, "fp32": 95.7},
    "mi300x": {"bf16": 1307.4, "fp16": 1307.4, "tf32": 653.7, "fp32": 163.4},
    "max1550": {"bf16": 832.0, "fp16": 832.0, "tf32": 416.0, "fp32": 52.0},  # Intel Data Center GPU Max 1550 (Aurora)
    "gaudi2": {"bf16": 432.0, "fp16": 432.0, "fp32": 216.0},
}
#: the precision assumed when a run does not say (large models train in half precision)
DEFAULT_PRECISION = "bf16"
#: kept for ``--gpu``'s choices: the half-precision peak of each
GPU_PEAK_TFLOPS: dict[str, float] = {k: v.get("bf16", v.get("fp16", 0.0)) for k, v in GPU_PEAKS.items()}

# names as logs print them (nvidia-smi, torch.cuda.get_device_name, rocm-smi, xpu-smi) -> table key;
# first match wins, so the more specific names come first
_NAMES: tuple[tuple[re.Pattern[str], str], ...] = tuple((re.compile(p, re.IGNORECASE), key) for p, key in (
    (r"\bGH200\b", "gh200"), (r"\bH200\b", "h200"), (r"\bH100\b.*\bPCIe\b", "h100-pcie"), (r"\bH100\b", "h100"),
    (r"\bB200\b", "b200"), (r"\bA100\b.*\b40\s?GB\b", "a100-40gb"), (r"\bA100\b", "a100"),
    (r"\bV100\b.*\b16\s?GB\b", "v100-16gb"), (r"\bV100\b", "v100"), (r"\bL40S\b", "l40s"),
    (r"\bA6000\b", "a6000"), (r"\bA10\b", "a10"), (r"\bMI250X?\b", "mi250x"), (r"\bMI300X\b", "mi300x"),
    (r"\bMax 1550\b", "max1550"), (r"\bGaudi ?2\b", "gaudi2"),
))


def gpu_key(name: Optional[str]) -> Optional[str]:
    """The table's key for a GPU as a log names it (``Tesla V100-SXM2-32GB`` -> ``v100``)."""
    if not name:
        return None
    if name.strip().lower() in GPU_PEAKS:
        return name.strip().lower()
    return next((key for pattern, key in _NAMES if pattern.search(name)), None)


@dataclass(frozen=True)
class Peak:
    tflops: float
    gpu: Optional[str]  # table key, None for a peak given by number
    precision: Optional[str]
    source: str  # "--gpu-peak", "--gpu", or "log"


def peak_of(gpu: Optional[str], precision: Optional[str], source: str) -> Optional[Peak]:
    key = gpu_key(gpu)
    if key is None:
        return None
    peaks = GPU_PEAKS[key]
    wanted = precision or DEFAULT_PRECISION
    order = {"fp32": ("tf32", "fp32"), "tf32": ("tf32", "fp32"), "fp16": ("fp16", "bf16"),
             "bf16": ("bf16", "fp16")}.get(wanted, (wanted,))
    for p in order:
        if p in peaks:
            return Peak(peaks[p], key, p, source)
    return None


def choose_peak(override_tflops: Optional[float], override_gpu: Optional[str], logged_gpu: Optional[str],
                precision: Optional[str]) -> Optional[Peak]:
    """The peak MFU is taken against: a number given, else a GPU given, else the GPU the
    logs name; at the precision the run uses."""
    if override_tflops:
        return Peak(override_tflops, None, precision, "--gpu-peak")
    if override_gpu:
        return peak_of(override_gpu, precision, "--gpu")
    return peak_of(logged_gpu, precision, "log")


def peak_for(name: Optional[str]) -> Optional[float]:
    """The half-precision peak of a table GPU (the ``tflops`` verb's ``--gpu``)."""
    key = gpu_key(name)
    return GPU_PEAK_TFLOPS.get(key) if key else None
