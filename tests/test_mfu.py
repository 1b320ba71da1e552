"""MFU without flags: the GPU and precision read from the logs, the peak from the table,
and doubtful figures flagged with both numbers."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import ROOT, shared_or_skip
from tuimon.engine.ingest import parse_file
from tuimon.figures.gpus import choose_peak, gpu_key
from tuimon.figures.columns import render_summary
from tuimon.figures.record import from_dict
from tuimon.figures.summary import summarize
from tuimon.store.job_store import JobStore

ARGS = """------------------------ arguments ------------------------
  bf16 ............................................ {bf16}
  fp16 ............................................ {fp16}
  global_batch_size ............................... 16
  hidden_size ..................................... 4096
  num_attention_heads ............................. 32
  num_layers ...................................... 32
  padded_vocab_size ............................... 50304
  seq_length ...................................... 2048
  world_size ...................................... 8
-------------------- end of arguments ---------------------
"""


def _iterations(ms: float, tflops: float) -> str:
    return "".join(
        f" iteration {i:8d}/     100 | consumed samples: {i * 16:10d} | elapsed time per iteration (ms): {ms:.1f} | "
        f"throughput per GPU (TFLOP/s/GPU): {tflops:.1f} | learning rate: 1.000E-04 | global batch size:    16 | "
        f"lm loss: 2.500000E+00 | loss scale: 1.0 | number of skipped iterations:   0 | "
        f"number of nan iterations:   0 |\n" for i in range(1, 12))


def _summary(tmp_path, text: str, **kw) -> dict:
    path = tmp_path / "run-1.out"
    path.write_text(text)
    store = JobStore()
    parse_file(path, path.name, sink=store.add)
    (job,) = store.jobs.values()
    return summarize(job, **kw).as_dict()


@pytest.mark.parametrize("name,key", [
    ("NVIDIA A100-SXM4-80GB", "a100"), ("NVIDIA A100-SXM4-40GB", "a100-40gb"), ("Tesla V100-SXM2-16GB", "v100-16gb"),
    ("Tesla V100-SXM2...", "v100"), ("NVIDIA H100 80GB HBM3", "h100"), ("NVIDIA H100 PCIe", "h100-pcie"),
    ("NVIDIA GH200 480GB", "gh200"), ("NVIDIA H200", "h200"), ("NVIDIA B200", "b200"),
    ("AMD Instinct MI250X", "mi250x"), ("AMD Instinct MI300X", "mi300x"),
    ("Intel(R) Data Center GPU Max 1550", "max1550"), ("NVIDIA GeForce RTX 4090", None),
])
def test_gpu_names_as_logs_print_them(name, key):
    assert gpu_key(name) == key


def test_peak_follows_precision_and_overrides():
    assert choose_peak(None, None, "NVIDIA A100-SXM4-80GB", "bf16").tflops == 312.0
    assert choose_peak(None, None, "NVIDIA A100-SXM4-80GB", "fp32").tflops == 156.0  # TF32: never flatters
    assert choose_peak(None, None, "Tesla V100-SXM2-32GB", "bf16").precision == "fp16"  # no bf16 on V100
    assert choose_peak(None, "h100", "NVIDIA A100-SXM4-80GB", "bf16").tflops == 989.0  # --gpu beats the log
    assert choose_peak(500.0, "h100", "NVIDIA A100", None).tflops == 500.0  # --gpu-peak beats both
    assert choose_peak(None, None, None, "bf16") is None


def test_mfu_from_the_logs_without_flags(tmp_path):
    # a 6.66 B model (32 x 4096), 16 x 2048 tokens a step on 8 GPUs at 2 s: the model's work is
    # 6 x params x tokens, 81.8 TFLOPs a GPU; the forward recomputed would make it 109.1
    text = "GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-1)\n" + ARGS.format(bf16="True", fp16="False") \
        + _iterations(2000.0, 105.0)
    s = _summary(tmp_path, text)
    assert s["gpu"] == "NVIDIA A100-SXM4-80GB" and s["precision"] == "bf16"
    assert s["gpu_peak_tflops"] == 312.0 and s["gpu_peak_source"] == "log: a100 bf16"
    computed = s["tflops_per_gpu"]["computed"]
    # the arguments do not say whether activations are recomputed: nothing is assumed, the MFU is
    # of the model's work and there is no HFU
    assert computed == pytest.approx(81.8, abs=0.1) and s["mfu"] == pytest.approx(computed / 312.0, abs=1e-4)
    assert s["tflops_per_gpu"]["hardware"] is None and s["hfu"] is None
    assert s["checks"] == []  # the log's 105.0 is within a quarter of the work with recomputation (109.1)
    for fmt in ("table", "markdown"):
        assert f"{100 * s['mfu']:.1f}%" in render_summary([from_dict(s)], fmt)
    assert f",{s['mfu']}," in render_summary([from_dict(s)], "csv")  # machines get the ratio
    fp32 = _summary(tmp_path, text.replace("bf16 ...", "bf16 ...").replace("True", "False"))
    assert fp32["precision"] == "fp32" and fp32["gpu_peak_tflops"] == 156.0


def test_mfu_counts_the_models_work_and_hfu_the_recomputed_forward_where_the_log_says(tmp_path):
    from tuimon.figures.columns import tflops_text

    """MFU is the model's FLOPs over the peak, whether or not activations are recomputed; HFU adds
    the recomputed forward (seed 001's factor 4), and is known only where the log says.  The
    TFLOPs cell shows the log's own rate where it prints one, else the GPUs' computed work."""
    gpu = "GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-1)\n"
    args = ARGS.format(bf16="True", fp16="False")
    full = args.replace("  seq_length ...", "  recompute_granularity ......................... full\n  seq_length ...")
    none = args.replace("  seq_length ...", "  recompute_granularity ......................... None\n  seq_length ...")
    for text, ckpt, hardware in ((full, True, 109.1), (none, False, 81.8), (args, None, None)):
        s = _summary(tmp_path, gpu + text + _iterations(2000.0, 105.0))
        assert s["activation_checkpointing"] is ckpt
        assert s["tflops_per_gpu"]["computed"] == pytest.approx(81.8, abs=0.1)
        assert s["mfu"] == pytest.approx(s["tflops_per_gpu"]["computed"] / 312.0, abs=1e-4)
        if hardware is None:
            assert s["tflops_per_gpu"]["hardware"] is None and s["hfu"] is None
        else:
            assert s["tflops_per_gpu"]["hardware"] == pytest.approx(hardware, abs=0.1)
            assert s["hfu"] == pytest.approx(s["tflops_per_gpu"]["hardware"] / 312.0, abs=1e-4)
        assert tflops_text(from_dict(s)) == "105.0r"  # the log's statement
        silent = _summary(tmp_path, gpu + text + _iterations(2000.0, 105.0).replace(
            "throughput per GPU (TFLOP/s/GPU): 105.0 | ", ""))
        assert silent["tflops_per_gpu"]["reported"] is None
        assert tflops_text(from_dict(silent)) == f"{hardware or 81.8:.1f}"  # no rate of its own: the computed


def test_mfu_above_100_and_disagreeing_tflops_are_flagged(tmp_path):
    args = ARGS.format(bf16="False", fp16="True").replace(  # (recomputation known: the MFU is the formula's)
        "  seq_length ...", "  recompute_granularity ......................... full\n  seq_length ...")
    text = "GPU 0: Tesla V100-SXM2-32GB (UUID: GPU-1)\n" + args + _iterations(300.0, 98.1)
    s = _summary(tmp_path, text)
    computed, reported = s["tflops_per_gpu"]["computed"], s["tflops_per_gpu"]["reported"]
    assert s["mfu"] > 1.0 and reported == 98.1
    assert any("above 100%" in c and "v100 fp16 peak (125 TFLOPs" in c for c in s["checks"])
    assert any(f"reported {reported:.1f} and computed {computed:.1f}" in c for c in s["checks"])
    table = render_summary([from_dict(s)], "table")
    assert "%!" in table and "! run-1: MFU" in table
    assert render_summary([from_dict(s)], "csv").splitlines()[0].endswith(",checks")


def test_json_says_why_there_is_no_mfu(tmp_path):
    s = _summary(tmp_path, ARGS.format(bf16="True", fp16="False") + _iterations(2000.0, 60.0))
    assert s["gpu"] is None and s["mfu"] is None and s["gpu_peak_tflops"] is None
    s = _summary(tmp_path, ARGS.format(bf16="True", fp16="False") + _iterations(2000.0, 60.0), gpu="h100")
    assert s["gpu_peak_source"] == "--gpu: h100 bf16" and s["mfu"] is not None


def test_corpus_logs_that_name_their_gpu_get_mfu():
    corpus = shared_or_skip("corpus")
    out = subprocess.run([sys.executable, "-m", "tuimon", "summary", "--format", "json", "--no-cache", str(corpus)],
                         cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr
    rows = {r["job"]: r for r in json.loads(out.stdout)}
    named = {job: r["gpu"] for job, r in rows.items() if r["gpu"]}
    print("corpus jobs that name their GPU:", json.dumps(named, indent=1))
    assert named, "no corpus log named its GPU"
    for job, r in rows.items():
        if r["gpu"] and gpu_key(r["gpu"]):
            assert r["gpu_peak_tflops"], job
            if r["tflops_per_gpu"]["computed"] or r["tflops_per_gpu"]["reported"]:
                assert r["mfu"] is not None and 0 < r["mfu"], job
