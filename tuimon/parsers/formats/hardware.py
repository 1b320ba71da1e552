"""The accelerator a run uses and the precision it computes in, as logs print them:
nvidia-smi (``-L`` and its table), ``torch.cuda.get_device_name`` and the trainers'
own prints of it (torchtitan's "CUDA capacity"), rocm-smi and torch on ROCm, Intel's
xpu-smi and torch on XPU; DeepSpeed's engine configuration and Hugging Face's
TrainingArguments for the precision (Megatron's argument block gives it too, see
:func:`parsers.common.config_from_args`).  MFU is taken against this GPU's peak."""
from __future__ import annotations

FORMAT = {
    "name": "hardware",
    "description": "GPU model and training precision",
    "lines": [
        {
            "event": "run_config",
            "anchors": ["NVIDIA ", "Tesla "],
            # a data-centre part's model number: A100, H100, GH200, B200, V100, L40S...
            "regex": r"(?P<gpu>(?:NVIDIA|Tesla) [A-Z]{1,3}\d{2,4}\w*(?:[-.][\w.]{1,16}){0,4})",
            "types": {"gpu": "str"},
            "samples": [
                {"line": "GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-5c1b7a3e-0f0c-8d5e-1d2e-3f4a5b6c7d8e)",
                 "expect": {"gpu": "NVIDIA A100-SXM4-80GB"}},
                {"line": "|   0  Tesla V100-SXM2...  Off  | 00000000:1A:00.0 Off |                    0 |",
                 "expect": {"gpu": "Tesla V100-SXM2..."}},
                {"line": "[rank0]:[titan] 2026-05-20 01:16:19,154 - root - INFO - CUDA capacity: NVIDIA B200 with "
                         "178.35GiB memory", "expect": {"gpu": "NVIDIA B200"}},
                {"line": "[GPUFreqManager] Initialized for 16 GPUs (Tesla V100-SXM3-32GB)",
                 "expect": {"gpu": "Tesla V100-SXM3-32GB"}},
                {"line": "Using device: NVIDIA H100 80GB HBM3", "expect": {"gpu": "NVIDIA H100"}},
            ],
        },
        {
            "event": "run_config",
            "anchor": "AMD Instinct MI",
            "regex": r"(?P<gpu>AMD Instinct MI\d{3}[A-Z]?)",
            "types": {"gpu": "str"},
            "samples": [
                {"line": "GPU[0]\t\t: Card Series: \t\tAMD Instinct MI250X / MI250",
                 "expect": {"gpu": "AMD Instinct MI250X"}},
            ],
        },
        {
            "event": "run_config",
            "anchor": "Data Center GPU Max ",
            "regex": r"(?P<gpu>Intel\(R\) Data Center GPU Max \d{4})",
            "types": {"gpu": "str"},
            "samples": [
                {"line": "[0] level_zero:gpu:0 Intel(R) Level-Zero, Intel(R) Data Center GPU Max 1550 1.3 [1.3.26918]",
                 "expect": {"gpu": "Intel(R) Data Center GPU Max 1550"}},
            ],
        },
        {
            "event": "run_config",
            "anchors": ["bf16_enabled ", "bfloat16_enabled "],
            # led by a literal: a regex led by (?:^|...) is tried at every position of a block
            "regex": r"b(?:f16|float16)_enabled \.+ True\s*$",
            "set": {"precision": "bf16"},
            "samples": [{"line": "[2024-06-21 10:50:42,111] [INFO] [config.py:988:print]   bfloat16_enabled "
                                 "............. True", "expect": {"precision": "bf16"}},
                        {"line": "  bf16_enabled ................. True", "expect": {"precision": "bf16"}}],
        },
        # Megatron's arguments.py: print('using {} for parameters ...'.format(args.params_dtype)), the
        # dtype --bf16 / --fp16 chose (else float32): one rule a dtype (a rule sets constants)
        *({
            "event": "run_config",
            "anchor": " for parameters ...",
            "regex": rf"using torch\.{dtype} for parameters \.\.\.",
            "set": {"precision": precision},
            "samples": [{"line": f"using torch.{dtype} for parameters ...", "expect": {"precision": precision}}],
        } for dtype, precision in (("bfloat16", "bf16"), ("float16", "fp16"), ("float32", "fp32"))),
        {
            "event": "run_config",
            "anchor": "fp16_enabled ",
            "regex": r"fp16_enabled \.+ True\s*$",
            "set": {"precision": "fp16"},
            "samples": [{"line": "[2022-06-29 01:00:50,123] [INFO] [config.py:1063:print]   fp16_enabled "
                                 "................. True", "expect": {"precision": "fp16"}}],
        },
        {
            # fp16 off: fp32, unless the run computes in bf16 (DeepSpeed prints bf16_enabled first,
            # in its sorted list: the store keeps a half precision a job has over this fp32)
            "event": "run_config",
            "anchor": "fp16_enabled ",
            "regex": r"\bfp16_enabled \.+ False\s*$",
            "set": {"precision": "fp32"},
            "samples": [{"line": "[2022-07-02 05:00:42,820] [INFO] [config.py:1048:print]   fp16_enabled "
                                 "................. False", "expect": {"precision": "fp32"}}],
        },
        {
            # DeepSpeed's engine configuration: its global batch (all ranks, all micro-steps)
            "event": "run_config",
            "anchors": ["train_batch_size ", "train_micro_batch_size_per_gpu "],
            "regex": r"\] +(?:train_batch_size \.+ (?P<global_batch>\d+)|train_micro_batch_size_per_gpu \.* "
                     r"?(?P<micro_batch>\d+))\s*$",
            "samples": [
                {"line": "[2022-07-02 05:00:42,822] [INFO] [config.py:1048:print]   train_batch_size ............. 4",
                 "expect": {"global_batch": 4}},
                {"line": "[2022-07-02 05:00:42,822] [INFO] [config.py:1048:print]   train_micro_batch_size_per_gpu  4",
                 "expect": {"micro_batch": 4}},
            ],
        },
        {
            "event": "run_config",
            "anchors": ["bf16=True", "fp16=True"],
            "regex": r"(?<![\w-])(?P<precision>bf16|fp16)=True,?\s*$",
            "types": {"precision": "str"},
            "samples": [{"line": "bf16=True,", "expect": {"precision": "bf16"}}],
        },
    ],
}
