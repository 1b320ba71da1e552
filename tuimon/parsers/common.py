"""Small helpers shared by several format parsers."""
from __future__ import annotations

import shlex
from typing import Optional

from .numbers import to_int
from .patterns import lazy

#: DeepSpeed's log_dist and Megatron's memory reports tag a line "[Rank N]": its anchor, and its pattern
RANK_ANCHOR = "[Rank"
RANK_TAG = r"\[Rank (\d{1,6})\]"
_RANK_TAG = lazy(RANK_TAG)
ANSI = lazy(r"\x1b\[[0-9;]*m")  # an SGR colour code (core/src/metrics.rs reads them so too)


def strip_ansi(text: str) -> str:
    """``text`` without its SGR colour codes (torchtitan colours its metrics line)."""
    return ANSI.sub("", text) if "\x1b" in text else text


def message_of(body: str, limit: int = 500) -> str:
    """A line as an event's message: stripped, cut to ``limit`` characters."""
    return body.strip()[:limit]


def rank_tag(body: str) -> Optional[int]:
    """Rank from a ``[Rank N]`` tag (DeepSpeed log_dist, Megatron memory reports)."""
    m = _RANK_TAG.search(body)
    return int(m.group(1)) if m else None


def rank_or(body: str, default: Optional[int]) -> Optional[int]:
    """The rank of the line's ``[Rank N]`` tag, else (no tag, or an odd one) ``default``."""
    rank = rank_tag(body) if RANK_ANCHOR in body else None
    return default if rank is None else rank


_NORM = lazy(r"[^a-z0-9/]+")
_norm_cache: dict[str, str] = {}


def norm_key(raw: str) -> str:
    """``Elapsed time per iteration (ms)`` -> ``elapsed time per iteration ms``;
    ``lm_loss``/``lm-loss`` -> ``lm loss``.  Cached: keys repeat on every line."""
    key = _norm_cache.get(raw)
    if key is None:
        key = _NORM.sub(" ", raw.lower()).strip()
        if len(_norm_cache) < 4096:
            _norm_cache[raw] = key
    return key


# Model and parallelism flags as spelled on Megatron/DeepSpeed command lines
# and in Megatron's argument dump (underscored).
_ARG_FIELDS: dict[str, tuple[str, type]] = {
    "num_layers": ("num_layers", int),
    "hidden_size": ("hidden_size", int),
    "num_attention_heads": ("num_heads", int),
    "seq_length": ("seq_length", int),
    "vocab_size": ("vocab_size", int),
    "padded_vocab_size": ("padded_vocab_size", int),
    "micro_batch_size": ("micro_batch", int),
    "batch_size": ("micro_batch", int),  # Megatron <= 1.x: per-GPU batch
    "global_batch_size": ("global_batch", int),
    "tensor_model_parallel_size": ("tp", int),
    "model_parallel_size": ("tp", int),
    "pipeline_model_parallel_size": ("pp", int),
    "data_parallel_size": ("dp", int),
    "world_size": ("world_size", int),
    "global_num_gpus": ("world_size", int),  # GPT-NeoX
    "train_micro_batch_size_per_gpu": ("micro_batch", int),  # GPT-NeoX (DeepSpeed's name)
    "pipe_parallel_size": ("pp", int),  # GPT-NeoX: 0 is no pipeline engine, one stage (config_from_args)
    "train_iters": ("train_iters", int),
}
_CKPT_TRUE_FLAGS = {"checkpoint_activations", "recompute_activations",
                    "deepspeed_activation_checkpointing"}


def config_from_args(pairs: dict[str, str]) -> dict:
    """RunConfig fields from Megatron-style ``name -> value`` pairs."""
    out: dict = {}
    for name, value in pairs.items():
        spec = _ARG_FIELDS.get(name)
        if spec is not None:
            v = to_int(value)
            if v is not None and v >= 0:
                out[spec[0]] = v
    if out.get("pp") == 0:
        out["pp"] = 1
    out.update(_architecture(pairs))
    ckpt = _activation_checkpointing(pairs)
    if ckpt is not None:
        out["activation_checkpointing"] = ckpt
    precision = _precision(pairs)
    if precision is not None:
        out["precision"] = precision
    return out


# the model's shape beyond the seed's GPT (Megatron-Core's names; Megatron-DeepSpeed's where they differ):
# what the FLOPs of an iteration and the parameter count depend on (figures.flops)
_SHAPE_INTS = {"ffn_hidden_size": "ffn_hidden_size", "kv_channels": "kv_channels",
               "num_key_value_heads": "num_query_groups",  # Megatron-DeepSpeed (the heads when no GQA)
               "moe_router_topk": "moe_topk", "topk": "moe_topk", "moe_ffn_hidden_size": "moe_ffn_hidden_size",
               "moe_shared_expert_intermediate_size": "moe_shared_ffn_size",
               "expert_model_parallel_size": "ep", "moe_expert_parallel_size": "ep"}
_FIRST_INT = lazy(r"\d{1,9}")


def _on(value: Optional[str]) -> Optional[bool]:
    """A flag's value as Megatron prints it (True/False) or as a bare command-line flag ('')."""
    if value is None:
        return None
    word = value.strip().lower()
    return True if word in ("true", "1", "") else False if word in ("false", "0", "none") else None


def _architecture(pairs: dict[str, str]) -> dict:
    out: dict = {}
    for name, field in _SHAPE_INTS.items():
        value = to_int(pairs[name]) if name in pairs else None
        if value is not None and value > 0:
            out[field] = value
    # Megatron-Core keeps num_query_groups (default 1) whether or not attention is grouped
    if _on(pairs.get("group_query_attention")) and (groups := to_int(pairs.get("num_query_groups"))):
        out["num_query_groups"] = groups
    for name, field in (("swiglu", "swiglu"), ("untie_embeddings_and_output_weights", "untied"),
                        ("attention_output_gate", "output_gate"), ("add_bias_linear", "linear_bias")):
        flag = _on(pairs.get(name))
        if flag is not None:
            out[field] = flag
    if "normalization" in pairs:  # RMSNorm has no bias
        out["rmsnorm"] = pairs["normalization"].strip().lower() == "rmsnorm"
    out.update(_neox_architecture(pairs))
    # "--num-experts 8"; Megatron-DeepSpeed prints a list of experts per layer group ("[1]": dense)
    experts = _FIRST_INT.search(pairs.get("num_experts") or "")
    if experts is not None:
        out["num_experts"] = int(experts.group(0))
    return out


def _neox_architecture(pairs: dict[str, str]) -> dict:
    """GPT-NeoX's names for the shape: its LLaMA MLP (mlp_type llama: gated, without biases, as wide as
    LLaMAParallelMLP makes it, 2 x 4h/3 rounded up to a multiple of 256), no_weight_tying, norm."""
    out: dict = {}
    # NeoX's own global batch (DeepSpeed's train_batch_size, accumulation included); a training script's
    # --train_batch_size is a per-device one (the FSDP examples'): read it only beside NeoX's global_num_gpus
    batch = to_int(pairs.get("train_batch_size")) if "global_num_gpus" in pairs else None
    if batch:
        out["global_batch"] = batch
    if pairs.get("mlp_type", "").strip().lower() == "llama":
        out["swiglu"], out["linear_bias"] = True, False
        hidden = to_int(pairs.get("hidden_size"))
        if hidden and "ffn_hidden_size" not in pairs:
            width = int(2 * hidden * 4 / 3)
            out["ffn_hidden_size"] = 256 * ((width + 255) // 256)
    tied = _on(pairs.get("no_weight_tying"))
    if tied is not None and "untie_embeddings_and_output_weights" not in pairs:
        out["untied"] = tied
    if pairs.get("norm", "").strip().lower() == "rmsnorm":
        out["rmsnorm"] = True
    return out


def _precision(pairs: dict[str, str]) -> Optional[str]:
    """bf16 / fp16 from Megatron's flags (or its params_dtype); fp32 when it lists both off."""
    def on(name: str) -> Optional[bool]:
        value = pairs.get(name)
        return None if value is None else value.strip().lower() in ("true", "1", "")
    named = pairs.get("precision", "").strip().lower()  # GPT-NeoX: fp16, bfloat16 or fp32
    if named in ("fp16", "float16", "half"):
        return "fp16"
    if named in ("bf16", "bfloat16"):
        return "bf16"
    if named in ("fp32", "float32"):
        return "fp32"
    if on("bf16"):
        return "bf16"
    if on("fp16"):
        return "fp16"
    dtype = pairs.get("params_dtype", "").lower()
    if "bfloat16" in dtype:
        return "bf16"
    if "float16" in dtype or "half" in dtype:
        return "fp16"
    if on("fp16") is False and not on("bf16"):  # both off; or fp16 off where bf16 is no flag yet (Megatron 1.x)
        return "fp32"
    return None


def _activation_checkpointing(pairs: dict[str, str]) -> Optional[bool]:
    seen = False
    for flag in _CKPT_TRUE_FLAGS:
        if flag in pairs:
            seen = True
            if pairs[flag].strip().lower() in ("", "true", "1"):
                return True
    for name in ("activations_checkpoint_method", "recompute_method"):
        if name in pairs:
            seen = True
            if pairs[name].strip().lower() not in ("none", "", "null"):
                return True
    if "recompute_granularity" in pairs:
        seen = True
        if pairs["recompute_granularity"].strip().lower() == "full":
            return True
    return False if seen else None


_QUOTING = lazy(r"[\"'\\]")
_SHELL_SPACE = lazy(r"[ \t\r\n]+")  # shlex's whitespace, not str.split's (which splits on more)


# a shell word as shlex (POSIX) reads it: runs of plain characters, '...' (all literal), "..." (a
# backslash escapes only \\ and "), and a backslash escaping the next character
_SHELL_WORD = lazy(r"""(?:[^ \t\r\n'"\\]+|'[^']*'|"(?:[^"\\]|\\[\s\S])*"|\\[\s\S])+""")
_SHELL_PART = lazy(r"""[^'"\\]+|'([^']*)'|"((?:[^"\\]|\\[\s\S])*)"|\\([\s\S])""")
_DQ_ESCAPE = lazy(r'\\([\\"])')


def shell_words(command: str) -> list[str]:
    """``shlex.split(command, posix=True)``, 20x faster on a long launch command: its words
    found by regex, each unquoted as shlex does; a command only shlex can say is wrong
    (an open quote, a last lone backslash) goes to it, to raise as it does."""
    words: list[str] = []
    at = 0
    for m in _SHELL_WORD.finditer(command):
        if command[at:m.start()].strip(" \t\r\n"):  # something no word holds: shlex says what is wrong
            return shlex.split(command, posix=True)
        at = m.end()
        word = m.group(0)
        if "\\" not in word and not ("'" in word and '"' in word):  # quotes of one kind: they go, all else stays
            words.append(word.replace("'", "").replace('"', ""))
            continue
        out = []
        for part in _SHELL_PART.finditer(word):
            single, double, escaped = part.groups()
            if single is not None:
                out.append(single)
            elif double is not None:
                out.append(_DQ_ESCAPE.sub(r"\1", double) if "\\" in double else double)
            elif escaped is not None:
                out.append(escaped)
            else:
                out.append(part.group(0))
        words.append("".join(out))
    if command[at:].strip(" \t\r\n"):
        return shlex.split(command, posix=True)
    return words


def flags_from_command(command: str) -> dict[str, str]:
    """``--num-layers 32 --checkpoint-activations`` -> {num_layers: '32', checkpoint_activations: ''}."""
    if not _quoted_or_odd(command):  # ASCII words between shlex's spaces alone: str.split's words
        words = command.split()
    elif _QUOTING.search(command) is None:  # what shlex would split the same way, 30x faster
        words = [w for w in _SHELL_SPACE.split(command) if w]
    else:
        try:
            words = shell_words(command)
        except ValueError:
            words = command.split()
    out: dict[str, str] = {}
    # (a word after a flag is its value unless it is a flag too: the flags are the words starting with "--"
    # either way, taken with the word after each, not word by word: a launch command has hundreds)
    for flag, nxt in [(w, nxt) for w, nxt in zip(words, [*words[1:], ""]) if w.startswith("--") and len(w) > 2]:
        name, eq, value = flag[2:].partition("=")
        if not eq and nxt and not nxt.startswith("--"):
            value = nxt
        out[name.replace("-", "_")] = value
    return out


def _quoted_or_odd(command: str) -> bool:
    """Whether ``command`` may split otherwise than by str.split: it quotes or escapes, or holds a
    character str.split takes for a space and shlex does not (\\x0b, \\x0c, \\x1c-\\x1f, any
    beyond ASCII).  (``in`` tests: a regex search cost 5 ns a character of a long launch command.)"""
    return not command.isascii() or any(c in command for c in _ODD)


_ODD = ("'", '"', "\\", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x1f")


#: where a run's step time comes from when it is its step lines' own stamps, differenced
STAMP_DIFFERENCES = "the step lines' own stamps, differenced over the steps between them"
MAX_CLOCKS = 4096  # ranks a StampClock keeps (a line of every rank at most: bounded whatever the log says)


class StampClock:
    """A step's time from the stamps of two step lines of one rank, over the steps between
    them (DeepSpeed's ``step=N`` lines, torchtitan's metrics every ``log_freq`` steps); only a
    line's own stamp counts (a line without one carries an earlier line's)."""

    __slots__ = ("_last",)

    def __init__(self) -> None:
        self._last: dict[Optional[int], tuple[int, float]] = {}

    def elapsed_ms(self, rank: Optional[int], step: Optional[int], stamp: Optional[float]) -> Optional[float]:
        """The step's time in ms since the rank's last stamped step (None for its first, or where
        the step or the stamp went back)."""
        if step is None:
            return None
        before = self._last.pop(rank, None)  # (a step line without a stamp of its own breaks the chain)
        if stamp is None:
            return None
        if len(self._last) < MAX_CLOCKS:
            self._last[rank] = (step, stamp)
        if before is None or step <= before[0] or stamp < before[1]:
            return None
        return round((stamp - before[1]) * 1000.0 / (step - before[0]), 3)
