"""Megatron-LM's facts of a run, as data: the parallel layout, the vocabulary padding
and the argument list (the stateful parts, iteration records with their keys by
meaning, are :class:`parsers.megatron.MegatronParser`)."""
from __future__ import annotations

from typing import Any

from ..common import config_from_args
from ..numbers import to_int
from ..patterns import lazy

# GPT-NeoX's NeoXArgs.print pads "  {arg} {dots} {value}" with dots to 64 characters and appends
# whether the value is its default: "True........................updated", and with no dots at all
# where the line was already that long ("{'enabled': True}updated")
_NEOX_INFO = lazy(r"\.+(?:default|updated)$")
_NEOX_WIDTH = 64
_NEOX_NOTES = ("default", "updated")


def _neox_value(name: str, value: str) -> str:
    """``value`` without NeoX's default/updated note (a Megatron value is left as it is)."""
    if not value.endswith(_NEOX_NOTES):  # (no note: neither the regex nor the words can find one)
        return value
    return _without_note(name, value)


def _without_note(name: str, value: str) -> str:
    """``value`` without NeoX's note, read in full (see :func:`_neox_value`)."""
    m = _NEOX_INFO.search(value)
    if m is not None:
        return value[:m.start()]
    for word in _NEOX_NOTES:  # (a value ends in one at most: their order is no matter)
        bare = value[:-len(word)]
        # no dots: the line up to the value's end had reached the width (dots pad arg names to 32)
        if value.endswith(word) and bare and 4 + max(len(name), 32) + len(bare) >= _NEOX_WIDTH:
            return bare
    return value


def arguments(pairs: dict[str, str]) -> list[dict[str, Any]]:
    """The run's configuration from its argument list (L2L-Megatron-LM's layer-to-layer
    offload named first, where it is on)."""
    pairs = {name: _neox_value(name, value) for name, value in pairs.items()}
    fields: list[dict[str, Any]] = [{"framework": "megatron-lm", **config_from_args(pairs)}]
    if pairs.get("enable_l2l", "").strip().lower() == "true":
        fields.insert(0, {"framework": "l2l"})
    return fields


def task_configuration(pairs: dict[str, str]) -> list[dict[str, Any]]:
    """A Megatron-Bridge run's configuration: its dataset's ``sequence_length`` is the length
    it trains at (the model's ``seq_length`` is the longest its positions allow)."""
    pairs = dict(pairs)
    if "sequence_length" in pairs:
        pairs["seq_length"] = pairs["sequence_length"]
    # the model's TransformerConfig names what Megatron's arguments name otherwise
    if "gated_linear_unit" in pairs:
        pairs.setdefault("swiglu", pairs["gated_linear_unit"])
    if pairs.get("share_embeddings_and_output_weights", "").lower() in ("true", "false"):
        shared = pairs["share_embeddings_and_output_weights"].lower() == "true"
        pairs.setdefault("untie_embeddings_and_output_weights", str(not shared))
    if pairs.get("num_query_groups", "null").lower() not in ("null", "none", ""):
        pairs.setdefault("group_query_attention", "True")  # set: grouped (None is one group a head)
    fields = config_from_args(pairs)
    return [fields] if fields else []


def nemo_configuration(pairs: dict[str, str]) -> list[dict[str, Any]]:
    """A NeMo 1.x run's configuration, dumped as YAML after '*** Experiment configuration ***'
    (megatron_gpt_pretraining.py: OmegaConf.to_yaml(cfg)): its trainer's devices and nodes are
    the world, its model section Megatron's arguments under NeMo's names."""
    pairs = dict(pairs)
    renamed = {"encoder_seq_length": "seq_length", "activations_checkpoint_granularity": "recompute_granularity"}
    for theirs, ours in renamed.items():
        if theirs in pairs:
            pairs.setdefault(ours, pairs[theirs])
    activation = pairs.get("activation", "").strip().lower()
    if activation.endswith("swiglu") or activation.endswith("geglu"):
        pairs.setdefault("swiglu", "True")
    if pairs.get("bias", "").strip().lower() == "false":
        pairs.setdefault("add_bias_linear", "False")
    precision = pairs.get("precision", "").strip().lower()
    if precision:  # trainer.precision: bf16, bf16-mixed, 16, 16-mixed, 32
        pairs["precision"] = {"bf16-mixed": "bf16", "16": "fp16", "16-mixed": "fp16", "32": "fp32"}.get(
            precision, precision)
    fields = task_configuration(pairs)
    devices, nodes = to_int(pairs.get("devices")), to_int(pairs.get("num_nodes"))
    world = {"world_size": devices * nodes} if devices and nodes else {}
    # (no framework: a "trainer:" section is Lightning's too; NeMo's own lines say NeMo)
    return [{**(fields[0] if fields else {}), **world}]


FORMAT = {
    "name": "megatron-lm",
    "description": "Megatron-LM family: parallel layout, vocabulary padding, argument list",
    "blocks": [
        {
            # print_args: "  {arg} {'.' * (48 - len(arg))} {value}" between the two rules, sorted
            "event": "run_config",
            "begin": r"-{3,} arguments -{3,}",
            "end": r"-{3,} end of arguments -{3,}",
            "pair": r"^\s*(?P<name>\w+) \.{2,} ?(?P<value>.*?)\s*$",
            "anchor": " ..",
            "hook": arguments,
            "samples": [
                {"lines": ["------------------------ arguments ------------------------",
                           "  activations_checkpoint_method ................... uniform",
                           "  global_batch_size ............................... 1024",
                           "  hidden_size ..................................... 2048",
                           "  num_layers ...................................... 32",
                           "  tensor_model_parallel_size ...................... 4",
                           "-------------------- end of arguments ---------------------"],
                 "expect": {"num_layers": 32, "hidden_size": 2048, "activation_checkpointing": True, "tp": 4,
                            "global_batch": 1024, "framework": "megatron-lm"}},
                {"lines": ["------------------------ arguments ------------------------",
                           "  enable_l2l ...................................... True",
                           "  num_layers ...................................... 78",
                           "-------------------- end of arguments ---------------------"],
                 "expect": {"framework": "l2l"}},
                # GPT-NeoX's NeoXArgs.print: each value followed by dots and whether it is its default
                {"lines": ["-------------------- arguments --------------------",
                           "  checkpoint_activations .......... True........................updated",
                           "  model_parallel_size ............. 2...........................updated",
                           "  precision ....................... bfloat16....................updated",
                           "  pipe_parallel_size .............. 0...........................default",
                           "  bf16 ............................ {'enabled': True}...........updated",
                           "  train_micro_batch_size_per_gpu .. 16..........................updated",
                           "---------------- end of arguments ----------------"],
                 "expect": {"activation_checkpointing": True, "tp": 2, "precision": "bf16"}},
                {"lines": ["-------------------- arguments --------------------",
                           "  checkpoint_activations .......... False.......................default",
                           "---------------- end of arguments ----------------"],
                 "expect": {"activation_checkpointing": False}},
                {"lines": ["3: ------------------------ arguments ------------------------",
                           "3:   inference_dynamic_batching_buffer_size_gb .. 40.0",
                           "3:   seq_length ...................................... 4096",
                           "3: -------------------- end of arguments ---------------------"],
                 "expect": {"seq_length": 4096}},
            ],
        },
        {
            # Megatron-Bridge's ConfigContainer, dumped as YAML between "------- Task Configuration -------" and a
            # rule of dashes: its sections' own keys (two spaces in) are Megatron's argument names
            "event": "run_config",
            "begin": r"-{3,} Task Configuration -{3,}",
            "end": r"^----------+\s*$",  # (written out: the engine finds its marker lines by the literal)
            "pair": r"^  (?P<name>\w+): (?P<value>\S.*?)\s*$",
            "anchor": ": ",
            "hook": task_configuration,
            "samples": [
                {"lines": ["------- Task Configuration -------",
                           "_target_: megatron.bridge.training.config.ConfigContainer",
                           "dataset:",
                           "  sequence_length: 1024",
                           "  split_matrix:",
                           "  - - 0",
                           "model:",
                           "  hidden_size: 2048",
                           "  num_layers: 16",
                           "  recompute_granularity: null",
                           "  recompute_modules:",
                           "  - core_attn",
                           "  seq_length: 131072",
                           "  tensor_model_parallel_size: 1",
                           "train:",
                           "  global_batch_size: 512",
                           "  train_iters: 10",
                           "----------------------------------"],
                 "expect": {"seq_length": 1024, "num_layers": 16, "hidden_size": 2048, "global_batch": 512,
                            "train_iters": 10, "tp": 1, "activation_checkpointing": False}},
            ],
        },
        {
            # NeMo 1.x: the YAML of its whole configuration, from its first key ("name: megatron_gpt") or its
            # trainer section to the next log line; the trainer's and the model's keys two spaces in
            "event": "run_config",
            "begin": r"^trainer:\s*$",
            "end": r"^\[NeMo [IWED] ",
            "pair": r"^  (?P<name>\w+): (?P<value>\S.*?)\s*$",
            "anchor": ": ",
            "hook": nemo_configuration,
            "samples": [
                {"lines": ["trainer:",
                           "  devices: 8",
                           "  num_nodes: 4",
                           "  precision: bf16-mixed",
                           "model:",
                           "  micro_batch_size: 1",
                           "  global_batch_size: 256",
                           "  tensor_model_parallel_size: 2",
                           "  pipeline_model_parallel_size: 1",
                           "  encoder_seq_length: 4096",
                           "  num_layers: 32",
                           "  hidden_size: 4096",
                           "  ffn_hidden_size: 11008",
                           "  num_attention_heads: 32",
                           "  num_query_groups: null",
                           "  activation: fast-swiglu",
                           "  bias: false",
                           "  normalization: rmsnorm",
                           "  share_embeddings_and_output_weights: false",
                           "  activations_checkpoint_granularity: full",
                           "[NeMo I 2024-01-21 10:00:01 megatron_gpt_pretraining:40] Using bf16"],
                 "expect": {"world_size": 32, "seq_length": 4096, "global_batch": 256,
                            "micro_batch": 1, "tp": 2, "pp": 1, "num_layers": 32, "hidden_size": 4096,
                            "ffn_hidden_size": 11008, "swiglu": True, "linear_bias": False, "rmsnorm": True,
                            "untied": True, "activation_checkpointing": True, "precision": "bf16"}},
            ],
        },
    ],
    "lines": [
        {
            "event": "run_config",
            "anchor": "using world size: ",
            # "data-parallel size" since 2024 ("data-parallel-size" before), Megatron-DeepSpeed's
            # "sequence-parallel size", a comma missing after "context-parallel size: 1" in some versions
            "regex": r"using world size: (?P<world_size>\d+)(?:,? data-parallel[- ]size: (?P<dp>\d+))?"
                     r"(?:,? (?:context|sequence)-parallel size: \d+)?"
                     r"(?:,? hierarchical context-parallel sizes: (?:None|\[[\d, ]*\]))?"
                     r"(?:,? tensor-model-parallel size: (?P<tp>\d+))?(?:,? encoder-tensor-model-parallel size: \d+)?"
                     r"(?:,? pipeline-model-parallel size: (?P<pp>\d+))?",
            "samples": [
                {"line": "using world size: 64, data-parallel-size: 1, tensor-model-parallel size: 4, "
                         "pipeline-model-parallel size: 16 ",
                 "expect": {"world_size": 64, "dp": 1, "tp": 4, "pp": 16}},
                {"line": "using world size: 8, data-parallel-size: 2, context-parallel size: 1, hierarchical "
                         "context-parallel sizes: None, tensor-model-parallel size: 2, encoder-tensor-model-parallel "
                         "size: 0, pipeline-model-parallel size: 2, encoder-pipeline-model-parallel size: 0",
                 "expect": {"world_size": 8, "dp": 2, "tp": 2, "pp": 2}},
                {"line": "using world size: 56, data-parallel size: 28, context-parallel size: 1, hierarchical "
                         "context-parallel sizes: None, tensor-model-parallel size: 2, pipeline-model-parallel size: 1",
                 "expect": {"world_size": 56, "dp": 28, "tp": 2, "pp": 1}},
                {"line": "using world size: 16, data-parallel-size: 4, sequence-parallel size: 1, tensor-model-parallel "
                         "size: 2, pipeline-model-parallel size: 2 ",
                 "expect": {"world_size": 16, "dp": 4, "tp": 2, "pp": 2}},
                {"line": "using world size: 8, data-parallel size: 1, context-parallel size: 1 tensor-model-parallel "
                         "size: 4, pipeline-model-parallel size: 2",
                 "expect": {"world_size": 8, "dp": 1, "tp": 4, "pp": 2}},
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
        {
            # get_model: each model-parallel rank of data-parallel rank 0 counts its own parameters; the model's
            # size is their sum over the grid (figures.flops).  Since 2026-07 the grid names a third axis,
            # "(tensor, gtp_weight_remat, pipeline)" ("gtp_remat" in Megatron-Bridge's copy)
            "event": "run_config",
            "anchor": "number of parameters on ",
            # (Megatron before 2021 and GPT-NeoX: "number of parameters on model parallel rank 1: N", tensor ranks)
            "regex": r"number of parameters on (?:\((?:tensor|[a-z_]+)(?:, [a-z_]+){1,3}\) )?model parallel rank "
                     r"\(?(?P<model_rank>\d{1,6}(?:, ?\d{1,6}){0,3})\)?: (?P<rank_params>\d{1,15})\b",
            "samples": [
                {"line": " > number of parameters on (tensor, pipeline) model parallel rank (1, 0): 1904025088",
                 "expect": {"model_rank": "1, 0", "rank_params": 1904025088}},
                {"line": "3:  > number of parameters on (tensor, gtp_weight_remat, pipeline) model parallel rank "
                         "(0, 0, 3): 931233792", "expect": {"model_rank": "0, 0, 3", "rank_params": 931233792}},
                {"line": " > number of parameters on model parallel rank 1: 3369406464",
                 "expect": {"model_rank": "1", "rank_params": 3369406464}},
            ],
        },
        {
            # the theoretical memory report (Megatron-LM, Megatron-Bridge): the model's size as it counts it,
            # taken where the argument list does not give the seed's formula its inputs
            "event": "run_config",
            "anchor": "Total number of parameters in billions: ",
            "regex": r"Total number of parameters in billions: (?P<total_params_b>\d+(?:\.\d+)?)\b",
            "samples": [
                {"line": "Total number of parameters in billions: 1.24", "expect": {"total_params_b": 1.24}},
                {"line": "0: Total number of parameters in billions: 1.17", "expect": {"total_params_b": 1.17}},
            ],
        },
    ],
}
