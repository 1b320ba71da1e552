"""The model's size and the floating-point work of one iteration, from what the log states.

Size, first known of:
  1. the size the log states (torchtitan's count, Megatron's theoretical memory report);
  2. the sum of Megatron's per-rank counts (``number of parameters on (tensor, pipeline) model
     parallel rank (t, p): N``), once every rank of the model-parallel grid has reported (not
     with experts spread over ranks: data-parallel rank 0 holds only its own experts), less the
     copy of tied word embeddings a pipeline's last stage holds;
  3. the architecture: seed 001's ``l(12h^2+13h)+vh+sh+2h`` for the GPT shape it describes
     (4h MLP, full multi-head attention, tied output), else Megatron's count of the shape
     (grouped attention, gated MLP, an output layer of its own, experts).

FLOPs of an iteration, counting the model's work only (what MFU is of):
  - seed 001's ``6 x params x tokens`` (its TFLOPs formula with k = 3) where the model is the
    GPT shape with short sequences (attention under 5 % of the work), or where only its size is
    known;
  - Megatron-Core's ``num_floating_point_operations`` (training.py) where the log states a shape
    the seed formula was not written for: grouped-query attention, a gated MLP and its width,
    causal attention (half the score matrix), the vocabulary's logits, routed and shared experts,
    an attention output gate.

The hardware's work (what HFU is of) adds the forward pass recomputed under full activation
checkpointing: the seed's k = 4, or the transformer layers' forward again.  It is known only
where the log says whether activations are recomputed; a selective recomputation (core
attention only) is counted as none, an undercount of a few percent.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from .metrics import model_size_billion

SEED = "seed 001 (GPT shape): 6 x params x tokens"
SIZE_ONLY = "6 x params x tokens (the model's shape is not in the log)"
MEGATRON_CORE = "Megatron-Core (architecture)"


@dataclass(frozen=True)
class Shape:
    layers: int
    hidden: int
    heads: int
    seq: int
    vocab: int
    ffn: int  # the MLP's width (each expert's, for the routed ones: moe_ffn)
    groups: int  # key/value heads
    kv_channels: int
    swiglu: bool
    untied: bool
    output_gate: bool  # a gate on the attention's output (its projection is as wide as the queries')
    linear_bias: bool  # the linear layers have biases (Megatron's default; Llama's have none)
    rmsnorm: bool  # norms without a bias
    experts: int  # 0: a dense MLP
    topk: int
    moe_ffn: int
    shared_ffn: int

    @property
    def gpt(self) -> bool:
        """The GPT shape seed 001's size formula describes."""
        return (not self.swiglu and self.ffn == 4 * self.hidden and self.groups == self.heads
                and self.kv_channels * self.heads == self.hidden and self.experts == 0 and not self.output_gate)

    @property
    def short(self) -> bool:
        """Sequences short enough for 6 x params x tokens: causal attention over them adds under
        5 % to the layers' work (s / 12h; seed 001's runs: 1024 / 12 x 8192)."""
        return self.seq < 0.05 * 12 * self.hidden


def shape_of(config: dict) -> Optional[Shape]:
    """The model's shape, where the log gives its layers, width, heads, length and vocabulary."""
    layers, hidden, heads, seq = (config.get(k) for k in ("num_layers", "hidden_size", "num_heads", "seq_length"))
    vocab = config.get("padded_vocab_size") or config.get("vocab_size")
    if not (layers and hidden and seq and vocab):
        return None
    heads = heads or 0
    if not heads:  # the heads matter only where the shape is not the seed's: it needs them known
        if any(config.get(k) for k in ("num_query_groups", "kv_channels", "swiglu", "num_experts", "output_gate")):
            return None
        heads = 1
    experts = config.get("num_experts") or 0
    ffn = config.get("ffn_hidden_size") or 4 * hidden
    return Shape(layers, hidden, heads, seq, vocab, ffn, config.get("num_query_groups") or heads,
                 config.get("kv_channels") or hidden // heads, bool(config.get("swiglu")),
                 bool(config.get("untied")), bool(config.get("output_gate")),
                 config.get("linear_bias") is not False, bool(config.get("rmsnorm")), experts if experts > 1 else 0,
                 config.get("moe_topk") or 1,
                 config.get("moe_ffn_hidden_size") or ffn, config.get("moe_shared_ffn_size") or 0)


def _layer_params(s: Shape) -> float:
    """One transformer layer's parameters as Megatron builds it (biases where it has them, two norms)."""
    q, kv = s.kv_channels * s.heads, s.kv_channels * s.groups
    projected = q * (2 if s.output_gate else 1) + 2 * kv
    bias = 1 if s.linear_bias else 0
    attention = s.hidden * projected + q * s.hidden + bias * (projected + s.hidden)
    gate = 3 if s.swiglu else 2
    if s.experts:
        expert = gate * s.hidden * s.moe_ffn + bias * ((gate - 1) * s.moe_ffn + s.hidden)
        mlp = s.experts * expert + s.hidden * s.experts + gate * s.hidden * s.shared_ffn
    else:
        mlp = gate * s.hidden * s.ffn + bias * ((gate - 1) * s.ffn + s.hidden)
    return attention + mlp + 2 * _norm(s)


def _norm(s: Shape) -> int:
    return s.hidden if s.rmsnorm else 2 * s.hidden


def shape_params_billion(s: Shape) -> float:
    if s.gpt and not s.untied:
        return model_size_billion(s.layers, s.hidden, s.seq, s.vocab)
    embeddings = s.vocab * s.hidden * (2 if s.untied else 1)
    return (s.layers * _layer_params(s) + embeddings + _norm(s)) / 1e9


def rank_sum_billion(config: dict) -> Optional[float]:
    """The sum of Megatron's per-rank counts, once every rank of the grid has reported."""
    counts = config.get("rank_params")
    if not counts or (config.get("num_experts") or 0) > 1 and (config.get("ep") or 1) > 1:
        return None
    try:
        places = [tuple(int(x) for x in rank.split(",")) for rank in counts]
    except ValueError:
        return None
    if len({len(p) for p in places}) != 1:
        return None
    # complete only where the grid's tensor and pipeline extents are the run's (a run that failed while
    # building its stages has counted some of them: a pp-8 run reported 2 of 8 before its OOM)
    extents = [max(axis) + 1 for axis in zip(*places)]
    grid = 1
    for extent in extents:
        grid *= extent
    tp, pp = config.get("tp"), config.get("pp")
    # one axis: the tensor ranks of a run without a pipeline (older Megatron, GPT-NeoX)
    layout = (extents[0], extents[-1]) == (tp, pp) if len(extents) > 1 else extents[0] == tp and pp == 1
    if len(places) != grid or not layout:
        return None
    total = sum(counts.values())
    if extents[-1] > 1 and not config.get("untied"):
        # tied embeddings over a pipeline: the last stage holds a copy of the word embeddings, which
        # its rank counts again (52.42 B summed for BLOOM's 52 B)
        vocab, hidden = config.get("padded_vocab_size") or config.get("vocab_size"), config.get("hidden_size")
        if not (vocab and hidden):
            return None
        total -= vocab * hidden
    return total / 1e9


def params_billion(config: dict) -> tuple[Optional[float], Optional[str]]:
    """The model's size in billions of parameters, and where it comes from."""
    summed = rank_sum_billion(config)
    if summed:  # what the instantiated model holds, counted by the run itself
        return summed, "log (per-rank counts)"
    if config.get("total_params"):  # counted to the parameter (llm.c's num_parameters)
        return config["total_params"] / 1e9, "log"
    shape = shape_of(config)
    counted = shape_params_billion(shape) if shape is not None else None
    stated = config.get("total_params_b")
    if stated:
        # Megatron states its total to two decimals: a count of the shape that rounds to it is the
        # same figure, more precisely (a 0.035 B model is "0.03")
        same = counted is not None and round(counted, 2) == round(stated, 2)
        return (counted, "architecture (as the log's total)") if same else (stated, "log")
    if shape is not None:
        return counted, "seed 001 (GPT shape)" if shape.gpt and not shape.untied else "architecture"
    return None, None


@dataclass(frozen=True)
class IterationFlops:
    model: float  # the model's work (MFU)
    hardware: Optional[float]  # with recomputation (HFU); None where the log does not say
    formula: str
    attention_share: float = 0.0  # of the model's work, the causal attention over the sequence


def _core_flops(s: Shape, batch: float) -> tuple[float, float, float]:
    """Megatron-Core's FLOPs of an iteration (forward and backward), the transformer layers'
    forward alone (what full recomputation repeats) and the causal attention's share."""
    tokens = batch * s.seq
    q, kv = s.kv_channels * s.heads, s.kv_channels * s.groups
    gate = 3 if s.swiglu else 2
    # a multiply-add is 2 FLOPs; forward once, backward twice
    mlp = gate * (s.topk * s.moe_ffn + s.shared_ffn if s.experts else s.ffn)
    projected = q * (2 if s.output_gate else 1) + 2 * kv
    per_token_layer = 2 * s.hidden * projected + 2 * q * s.hidden + 2 * s.hidden * mlp
    core_attention = 2 * batch * s.seq * s.seq * q  # QK^T and its product with V, causal: half of each
    layers_forward = s.layers * (tokens * per_token_layer + core_attention)
    logits_forward = 2 * tokens * s.hidden * s.vocab
    return 3 * (layers_forward + logits_forward), layers_forward, \
        s.layers * core_attention / (layers_forward + logits_forward)


def iteration_flops(config: dict, batch: Optional[float], params_b: Optional[float]) -> Optional[IterationFlops]:
    """FLOPs of an iteration of ``batch`` sequences: the architecture's where the log states one the
    seed's formula does not describe, else 6 x params x tokens."""
    if not batch or batch <= 0:
        return None
    recompute = config.get("activation_checkpointing")
    shape = shape_of(config)
    if shape is not None and not (shape.gpt and shape.short):
        model, layers_forward, attention = _core_flops(shape, batch)
        return IterationFlops(model, None if recompute is None else model + (layers_forward if recompute else 0.0),
                              MEGATRON_CORE, attention)
    seq = config.get("seq_length")
    size = shape_params_billion(shape) if shape is not None else params_b
    if not size or not seq:
        return None
    model = 6.0 * size * 1e9 * seq * batch
    return IterationFlops(model, None if recompute is None else model * (4 / 3 if recompute else 1.0),
                          SEED if shape is not None else SIZE_ONLY)


def per_gpu_tflops(flops: Optional[float], iter_time_s: Optional[float], gpus: Optional[int]) -> Optional[float]:
    if flops is None or not iter_time_s or iter_time_s <= 0 or not gpus or gpus <= 0:
        return None
    value = flops / (iter_time_s * gpus * 1e12)
    return value if value == value and value != float("inf") else None
