"""Megatron-LM's one-line facts of a run, as data: the parallel layout and the
vocabulary padding (the stateful parts, argument blocks and iteration records
with their keys by meaning, are :class:`parsers.megatron.MegatronParser`)."""
from __future__ import annotations

FORMAT = {
    "name": "megatron-lm",
    "description": "Megatron-LM family: parallel layout, vocabulary padding",
    "lines": [
        {
            "event": "run_config",
            "anchor": "using world size: ",
            "regex": r"using world size: (?P<world_size>\d+)(?:, data-parallel-size: (?P<dp>\d+))?"
                     r"(?:, (?:context-parallel size: \d+, )?(?:hierarchical context-parallel sizes: \S+, )?"
                     r"tensor-model-parallel size: (?P<tp>\d+))?(?:, (?:encoder-)?(?:tensor-model-parallel size: \d+, )?"
                     r"pipeline-model-parallel size: (?P<pp>\d+))?",
            "samples": [
                {"line": "using world size: 64, data-parallel-size: 1, tensor-model-parallel size: 4, "
                         "pipeline-model-parallel size: 16 ",
                 "expect": {"world_size": 64, "dp": 1, "tp": 4, "pp": 16}},
                {"line": "using world size: 8, data-parallel-size: 2, context-parallel size: 1, hierarchical "
                         "context-parallel sizes: None, tensor-model-parallel size: 2, encoder-tensor-model-parallel "
                         "size: 0, pipeline-model-parallel size: 2, encoder-pipeline-model-parallel size: 0",
                 "expect": {"world_size": 8, "dp": 2, "tp": 2, "pp": 2}},
                {"line": "0: using world size: 32", "expect": {"world_size": 32}},
            ],
        },
        {
            # GPT-NeoX (a Megatron-DeepSpeed fork with its own trainer): its argument class names it
            "event": "run_config",
            "anchor": "NeoXArgs.",
            "regex": r"\bNeoXArgs\.(?:from_ymls|calculate_derived|configure_distributed_args|print)\(\)",
            "set": {"framework": "gpt-neox"},
            "samples": [
                {"line": "NeoXArgs.from_ymls() ['/home/u/gpt-neox/configs/70M.yml']",
                 "expect": {"framework": "gpt-neox"}},
                {"line": "INFO:root:NeoXArgs.calculate_derived() Total number of GPUs determined to be: 8",
                 "expect": {"framework": "gpt-neox"}},
            ],
        },
        {
            "event": "run_config",
            "anchor": "padded vocab (size: ",
            "regex": r"padded vocab \(size: (?P<vocab_size>\d+)\) with \d+ dummy tokens "
                     r"\(new size: (?P<padded_vocab_size>\d+)\)",
            "samples": [
                {"line": " > padded vocab (size: 50257) with 47 dummy tokens (new size: 50304)",
                 "expect": {"vocab_size": 50257, "padded_vocab_size": 50304}},
            ],
        },
    ],
}
