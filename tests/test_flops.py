"""The model's size and FLOPs of an iteration (tuimon.figures.flops), against the frameworks' own
definitions written out here: Megatron-Core's ``num_floating_point_operations`` (training.py,
2026-08: 3 GEMM passes x 2 FLOPs a multiply-add, causal attention over half the score matrix),
published parameter counts, and Megatron's per-rank count lines as ``get_model`` prints them."""
from __future__ import annotations

import pytest

from tests.helpers.records import summary_of_text
from tuimon.figures import flops

LLAMA_1B = dict(num_layers=16, hidden_size=2048, num_heads=32, num_query_groups=8, kv_channels=64,
                ffn_hidden_size=8192, swiglu=True, linear_bias=False, rmsnorm=True, padded_vocab_size=128256,
                seq_length=8192)
LLAMA_8B = dict(num_layers=32, hidden_size=4096, num_heads=32, num_query_groups=8, kv_channels=128,
                ffn_hidden_size=14336, swiglu=True, linear_bias=False, rmsnorm=True, untied=True,
                padded_vocab_size=128256, seq_length=8192)


def megatron_core(c: dict, batch: int) -> float:
    """Megatron-Core's FLOPs of one iteration, as training.py writes them for a dense or MoE
    transformer with grouped-query attention (no MLA, no MTP)."""
    h, s, layers = c["hidden_size"], c["seq_length"], c["num_layers"]
    heads, groups, kv = c["num_heads"], c.get("num_query_groups") or c["num_heads"], c.get("kv_channels")
    kv = kv or h // heads
    q = kv * heads
    ffn_factor = 3 if c.get("swiglu") else 2
    experts, topk = c.get("num_experts") or 0, c.get("moe_topk") or 1
    if experts > 1:
        mlp = (c.get("moe_ffn_hidden_size") or c["ffn_hidden_size"]) * topk * ffn_factor * layers \
            + (c.get("moe_shared_ffn_size") or 0) * ffn_factor * layers
    else:
        mlp = c["ffn_hidden_size"] * ffn_factor * layers
    self_attn = 3 * 2 * (h * (q + 2 * kv * groups) + q * h) * layers  # QKV and output projections
    core = 3 * 2 * q / 2 * 2 * layers
    tokens = batch * s
    return tokens * (3 * 2 * h * mlp + self_attn + 3 * 2 * h * c["padded_vocab_size"]) + batch * s * s * core


@pytest.mark.parametrize("config", [
    LLAMA_1B, LLAMA_8B,
    {**LLAMA_8B, "seq_length": 2048, "num_query_groups": 32},  # full multi-head attention, gated MLP
    dict(num_layers=24, hidden_size=2048, num_heads=16, ffn_hidden_size=1024, swiglu=True, num_experts=64,
         moe_topk=8, moe_shared_ffn_size=2048, padded_vocab_size=50304, seq_length=4096),  # MoE, shared experts
    dict(num_layers=28, hidden_size=3584, num_heads=28, num_query_groups=4, kv_channels=128,
         ffn_hidden_size=18944, swiglu=True, untied=True, padded_vocab_size=152064, seq_length=2048),  # Qwen2-7B
])
def test_the_architecture_formula_is_megatron_cores(config):
    work = flops.iteration_flops(config, 64, None)
    assert work is not None and work.formula == flops.MEGATRON_CORE
    assert work.model == pytest.approx(megatron_core(config, 64), rel=1e-12)
    assert work.hardware is None  # recomputation not stated: no HFU


def test_llama_1b_at_8k_counts_causal_attention():
    """At seq 8192 a Llama-3.2-1B shape spends a sixth of its work in causal attention, which
    seed 001's 6 x params x tokens leaves out: the architecture's count is 22 % more."""
    batch, gpus = 128, 32
    work = flops.iteration_flops(LLAMA_1B, batch, None)
    core = 3 * 2 * batch * 8192 * 8192 * 16 * 2048  # QK^T and AV, causal: half of each, fwd + 2 bwd
    assert work.attention_share == pytest.approx(core / megatron_core(LLAMA_1B, batch), rel=1e-12)
    assert 0.17 < work.attention_share < 0.19
    assert work.model / (6 * 1.2358144e9 * 8192 * batch) == pytest.approx(1.217, abs=0.001)
    seconds = work.model / (375.5e12 * gpus)  # the iteration time at which a GPU does 375.5 TFLOP/s
    assert flops.per_gpu_tflops(work.model, seconds, gpus) == pytest.approx(375.5)


@pytest.mark.parametrize("config, count", [
    (LLAMA_1B, 1_235_814_400),  # Llama-3.2-1B (tied)
    (LLAMA_8B, 8_030_261_248),  # Llama-3-8B (untied)
])
def test_shape_counts_are_the_published_ones(config, count):
    size, source = flops.params_billion(config)
    assert size * 1e9 == pytest.approx(count, rel=1e-9) and source == "architecture"


def test_recomputation_adds_the_layers_forward_and_the_seed_factor_four():
    full = flops.iteration_flops({**LLAMA_1B, "activation_checkpointing": True}, 8, None)
    off = flops.iteration_flops({**LLAMA_1B, "activation_checkpointing": False}, 8, None)
    assert off.hardware == off.model and full.model == off.model
    layers_forward = full.hardware - full.model
    logits = 3 * 2 * 8 * 8192 * 2048 * 128256
    assert layers_forward == pytest.approx((full.model - logits) / 3, rel=1e-12)  # the layers' forward, again
    gpt = dict(num_layers=64, hidden_size=8192, num_heads=64, seq_length=1024, padded_vocab_size=50304)
    seed = flops.iteration_flops({**gpt, "activation_checkpointing": True}, 1024, None)
    assert seed.formula == flops.SEED and seed.hardware / seed.model == pytest.approx(4 / 3)
    size = flops.shape_params_billion(flops.shape_of(gpt))
    assert seed.model == pytest.approx(6 * size * 1e9 * 1024 * 1024)
    # a GPT shape at a long sequence is no longer the seed's case: its attention counts
    assert flops.iteration_flops({**gpt, "seq_length": 131072}, 1, None).formula == flops.MEGATRON_CORE


def test_a_stated_size_without_shape_is_six_params_tokens():
    work = flops.iteration_flops({"seq_length": 4096, "total_params_b": 8.0}, 32, 8.0)
    assert work.formula == flops.SIZE_ONLY and work.model == pytest.approx(6 * 8e9 * 4096 * 32)


def test_rank_counts_are_summed_only_over_a_whole_grid():
    ranks = {f"{t}, {p}": 1_000_000_000 + p for t in range(2) for p in range(4)}
    base = {"tp": 2, "pp": 4, "untied": True, "rank_params": ranks}
    assert flops.params_billion(base) == (pytest.approx(8.000000012), "log (per-rank counts)")
    partial = {**base, "rank_params": {k: v for k, v in ranks.items() if not k.endswith("3")}}
    assert flops.rank_sum_billion(partial) is None  # a stage never reported (a failed start)
    assert flops.rank_sum_billion({**base, "pp": 8}) is None  # the layout says more stages
    assert flops.rank_sum_billion({**base, "tp": None}) is None  # the layout unknown: completeness unknown
    # tied embeddings: the last stage's copy of the word embeddings is counted once
    tied = {**base, "untied": False, "padded_vocab_size": 50304, "hidden_size": 8192}
    assert flops.rank_sum_billion(tied) == pytest.approx((8_000_000_012 - 50304 * 8192) / 1e9)
    assert flops.rank_sum_billion({**tied, "hidden_size": None}) is None
    # experts spread over expert-parallel ranks: data-parallel rank 0 counts only its own
    assert flops.rank_sum_billion({**base, "num_experts": 64, "ep": 8}) is None
    three = {"tp": 2, "pp": 2, "untied": True,
             "rank_params": {f"{t}, 0, {p}": 5 for t in range(2) for p in range(2)}}
    assert flops.rank_sum_billion(three) == pytest.approx(20 / 1e9)


def test_a_stated_two_decimal_total_gives_way_to_a_shape_count_that_rounds_to_it():
    assert flops.params_billion({**LLAMA_1B, "total_params_b": 1.24}) == \
        (pytest.approx(1.2358144), "architecture (as the log's total)")
    assert flops.params_billion({**LLAMA_1B, "total_params_b": 1.17}) == (1.17, "log")


def _megatron_log(groups: int, recompute: str, ranks: list[tuple[int, int, int]]) -> str:
    """A Megatron-LM log as training.py and arguments.py print it: the argument list, get_model's
    per-rank counts, iteration lines."""
    args = dict(num_layers=16, hidden_size=2048, num_attention_heads=32, group_query_attention="True",
                num_query_groups=groups, kv_channels=64, ffn_hidden_size=8192, swiglu="True",
                add_bias_linear="False", normalization="RMSNorm", untie_embeddings_and_output_weights="False",
                seq_length=8192, global_batch_size=128, micro_batch_size=1, tensor_model_parallel_size=2,
                pipeline_model_parallel_size=2, recompute_granularity=recompute, world_size=32, bf16="True")
    lines = ["------------------------ arguments ------------------------"]
    lines += [f"  {k} {'.' * (48 - len(k))} {v}" for k, v in sorted(args.items())]
    lines += ["-------------------- end of arguments ---------------------",
              " > padded vocab (size: 128000) with 256 dummy tokens (new size: 128256)"]
    lines += [f" > number of parameters on (tensor, pipeline) model parallel rank ({t}, {p}): {n}" for t, p, n in ranks]
    for i in range(1, 21):
        lines.append(f" [2026-08-18 03:55:{i:02d}] iteration {i:8d}/    1000 | consumed samples: {128 * i:12d} | "
                     f"elapsed time per iteration (ms): 2000.0 | learning rate: 1.0E-04 | global batch size:   128 | "
                     f"lm loss: 2.0E+00 | loss scale: 1.0 | number of skipped iterations:   0 | "
                     f"number of nan iterations:   0 |")
    return "\n".join(lines) + "\n"


def _summary(tmp_path, text: str) -> dict:
    return summary_of_text(text, "megatron.log").as_dict()


def test_a_megatron_log_of_a_llama_shape_end_to_end(tmp_path):
    # get_model's counts on a 2 x 2 grid: the first stage holds the embeddings, the last its copy
    embed = 128256 * 2048 // 2
    layer = (2048 * (2048 + 2 * 512) + 2048 * 2048 + 3 * 2048 * 8192) // 2 + 2 * 2048
    ranks = [(t, 0, embed + 8 * layer) for t in range(2)] + [(t, 1, embed + 8 * layer + 2048) for t in range(2)]
    s = _summary(tmp_path, _megatron_log(8, "full", ranks))
    total = sum(n for _, _, n in ranks) - 128256 * 2048
    assert s["params_billion"] == pytest.approx(total / 1e9, abs=5e-4) and s["params_source"] == \
        "log (per-rank counts)"
    config = {**LLAMA_1B, "seq_length": 8192}
    model = megatron_core(config, 128)
    assert s["flops_formula"] == flops.MEGATRON_CORE and s["activation_checkpointing"] is True
    assert s["tflops_per_gpu"]["computed"] == pytest.approx(model / (2.0 * 32 * 1e12), abs=0.01)
    assert s["tflops_per_gpu"]["hardware"] > s["tflops_per_gpu"]["computed"]
    # without the per-rank lines the shape gives the size
    s = _summary(tmp_path, _megatron_log(8, "None", []))
    assert s["params_billion"] == pytest.approx(1.2358, abs=5e-4) and s["params_source"] == "architecture"
    assert s["tflops_per_gpu"]["hardware"] == s["tflops_per_gpu"]["computed"]


def test_a_neox_llama_run_is_sized_and_laid_out_from_its_own_names(tmp_path):
    """GPT-NeoX prints its arguments with dots and a default/updated note (NeoXArgs.print), names its
    LLaMA MLP 'mlp_type llama' (gated, 2 x 4h/3 rounded up to 256: 11008 for 4096), its untied output
    'no_weight_tying', its pipeline 'pipe_parallel_size' (0: none) and counts parameters per tensor rank
    the older way ('number of parameters on model parallel rank 1: N').  CodeLlama-7B: 6,738,546,688."""
    def arg(name: str, value: str, note: str = "updated") -> str:
        text = f"  {name} {'.' * (32 - len(name))} {value}"
        return text + "." * (64 - len(text)) + note
    args = [arg("checkpoint_activations", "True"), arg("global_num_gpus", "8"), arg("hidden_size", "4096"),
            arg("mlp_type", "llama"), arg("model_parallel_size", "2"), arg("no_weight_tying", "True"),
            arg("norm", "rmsnorm"), arg("num_attention_heads", "32"), arg("num_layers", "32"),
            arg("pipe_parallel_size", "0", "default"), arg("seq_length", "4096"),
            arg("train_micro_batch_size_per_gpu", "16")]
    text = "\n".join(["NeoXArgs.from_ymls() ['configs/llemma_7b.yml']", "-------------------- arguments "
                      "--------------------", *args, "---------------- end of arguments ----------------",
                      " > padded vocab (size: 32016) with 0 dummy tokens (new size: 32016)"]) + "\n"
    s = _summary(tmp_path, text)
    assert (s["world_size"], s["config"]["tp"], s["config"]["pp"], s["config"]["dp"]) == (8, 2, 1, 4)
    assert s["global_batch"] == 64 and s["activation_checkpointing"] is True
    assert s["params_billion"] == pytest.approx(6.738546688, abs=5e-4) and s["params_source"] == "architecture"
    ranks = "".join(f" > number of parameters on model parallel rank {r}: 3369273344\n" for r in range(2))
    s = _summary(tmp_path, text + ranks)
    assert s["params_billion"] == pytest.approx(2 * 3369273344 / 1e9, abs=5e-4)
    assert s["params_source"] == "log (per-rank counts)"


def test_a_scripts_train_batch_size_is_no_global_batch_but_neoxs_is():
    from tuimon.parsers.common import config_from_args, flags_from_command

    fsdp = config_from_args(flags_from_command("python train.py --train_batch_size=4 --num_layers=32"))
    assert "global_batch" not in fsdp and fsdp["num_layers"] == 32  # the FSDP examples' per-device batch
    neox = config_from_args({"train_batch_size": "512", "global_num_gpus": "8", "pipe_parallel_size": "0"})
    assert (neox["global_batch"], neox["world_size"], neox["pp"]) == (512, 8, 1)
