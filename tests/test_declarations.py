"""A reader is data in ``parsers/``: a figure a log prints is one key-table row, one field
registry row and a sample, read the same by the compiled core and the Python engine.

Megatron-LM's ``--log-energy`` (training.py's training_log: ``energy per GPU (J/iter/GPU):
{energy:.1f} |`` and ``power per GPU (W/GPU): {power:.1f} |``) is the case: nothing in
``core/src`` names it, yet both engines give it, and every output shows it.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import ROOT


def _energy_log(path: Path) -> Path:
    lines = []
    for k, (energy, power, ms) in enumerate([(812.4, 650.1, 1249.6), (790.0, 640.0, 1234.4), (805.2, 648.8, 1241.1),
                                             (801.9, 643.0, 1247.1), (799.5, 645.5, 1238.6)], start=1):
        it = 10 * k
        lines.append(f" [2026-03-02 10:{it:02d}:11.271802] iteration {it:8d}/{1000:8d} | consumed samples: "
                     f"{it * 128:12d} | elapsed time per iteration (ms): {ms:.1f} | throughput per GPU "
                     f"(TFLOP/s/GPU): 402.7 | energy per GPU (J/iter/GPU): {energy:.1f} | power per GPU (W/GPU): "
                     f"{power:.1f} | learning rate: 2.999998E-04 | global batch size:   128 | lm loss: 7.412309E+00 |"
                     f" loss scale: 1.0 | grad norm: 1.873 | number of skipped iterations:   0 | number of nan "
                     f"iterations:   0 |")
    path.write_text("\n".join(lines) + "\n")
    return path


def _summary(log: Path, engine: str, *args: str) -> str:
    env = {**os.environ, "TUIMON_ENGINE": engine}
    done = subprocess.run([sys.executable, "-m", "tuimon", "summary", "--no-cache", *args, str(log)], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.parametrize("engine", ["core", "python"])
def test_megatron_energy_is_read_by_either_engine_from_the_declaration(tmp_path: Path, engine: str) -> None:
    from tuimon.engine import native
    if engine == "core" and native.core is None:
        pytest.skip(f"the compiled core is not importable ({native.name()})")
    log = _energy_log(tmp_path / "energy-run.log")
    job = json.loads(_summary(log, engine, "--format", "json"))[0]
    # the steady median: the first logged interval (warm-up) left out, the median of the other four,
    # (799.5 + 801.9) / 2 and (643.0 + 645.5) / 2
    assert job["energy_j_per_gpu"] == pytest.approx(800.7, abs=0.01)
    assert job["power_w_per_gpu"] == pytest.approx(644.25, abs=0.01)
    csv = _summary(log, engine, "--columns", "job,energy_j_per_gpu,power_w_per_gpu", "--format", "csv")
    assert csv.splitlines()[1].split(",")[1:] == ["800.7", "644.25"]
    table = _summary(log, engine, "--columns", "job,energy_j_per_gpu,power_w_per_gpu", "--format", "table")
    head, _, row = table.splitlines()[:3]
    assert head.split()[1:] == ["Energy/GPU", "Power/GPU"] and row.split()[1:] == ["800.7", "644.2"]


def test_the_core_sources_do_not_name_the_energy_keys() -> None:
    # the point of the case: adding it needed nothing in Rust
    text = "\n".join(p.read_text() for p in (ROOT / "core" / "src").glob("*.rs")).lower()
    assert "energy" not in text and "j/iter" not in text and "w/gpu" not in text


def _core_literals() -> list[tuple[str, str]]:
    """(file, text) of every string literal of core/src outside its test modules (their sample
    lines and declarations are test data), comments taken out first."""
    import re

    out = []
    for path in sorted((ROOT / "core" / "src").glob("*.rs")):
        text = path.read_text()
        text = text.split("#[cfg(test)]")[0]  # a module's tests come last
        text = re.sub(r"//[^\n]*", "", text)
        for m in re.finditer(r'b?r?"((?:[^"\\]|\\.)*)"', text):
            out.append((path.name, m.group(1)))
    return out


def _anchors() -> set[str]:
    """Every rule's anchor (the literals the built-in readers' rules are found by) and every text
    the core's readers are handed by the parsers' declarations."""
    from tuimon.engine import blocks, catalog
    from tuimon.parsers import megatron, prefix, timers, timestamps, torchtitan

    cat = catalog.current()
    _, _, presence = blocks._rule_set((), cat.builtin, tuple(cat.parsers), ())
    anchors = set(presence.literals)
    for declaration in (megatron.CORE_RECORD, megatron.CORE_MEMORY, megatron.CORE_EFFECTIVE, megatron.CORE_NUMWORKERS,
                        timers.CORE, torchtitan.CORE_METRICS, prefix.CORE, timestamps.CORE):
        for value in declaration.values():
            if isinstance(value, dict):  # (a shape: its parts)
                value = tuple(value.values())
            anchors.update(value if isinstance(value, (tuple, list)) else (value,))
    return {a for a in anchors if isinstance(a, str) and len(a.strip()) >= 3}


def test_the_core_holds_no_format_literal_key_or_pattern() -> None:
    anchors = _anchors()
    assert len(anchors) > 100  # the built-in readers' anchors were found (a check that cannot fail is none)
    assert {"time (ms)", "validate step", "Training epoch", "[Rank", "max allocated", "iteration ", "[default",
            "[rank"} <= anchors
    literals = _core_literals()
    assert literals, "no string literal found in core/src: the scan is wrong"
    # a short word (a key such as "step") is looked for as a whole literal, a longer text anywhere in one
    found = sorted({(name, a) for name, text in literals for a in anchors if (a in text if len(a) > 4 else a == text)})
    assert not found, f"core/src names formats' anchors or keys (move them into a parsers/ declaration): {found}"


def test_the_built_in_formats_pass_the_user_formats_safety_check() -> None:
    """The parsers compile their own formats with `re` and judge no regex (one safety check, the
    engine's, for users' regexes); the built-ins are held to it here instead."""
    from tuimon.engine.regex_safety import unbounded_nesting
    from tuimon.parsers.formats import BUILTIN_FORMATS

    sources = [s for f in BUILTIN_FORMATS for e in f.lines for s in (e.regex, e.pairs) if s]
    sources += [s for f in BUILTIN_FORMATS for b in f.blocks for s in (b.begin, b.end, b.pair)]
    assert len(sources) > 20
    assert [(s, unbounded_nesting(s)) for s in sources if unbounded_nesting(s)] == []


def test_the_core_frames_lines_by_the_declaration_it_is_handed() -> None:
    """The launcher prefixes and the leading stamp are the parsers' declarations: a declaration
    that names another prefix is read by the core with no change to it."""
    from tuimon.engine import native
    from tuimon.parsers import prefix, timestamps

    if native.core is None:
        pytest.skip("the compiled core is not built here (TUIMON_ENGINE=python or no wheel): nothing to check")
    made_up = dict(prefix.CORE, pattern=prefix.CORE["pattern"].replace("default", "worker"),
                   brackets=["[worker", "[rank"])
    theirs = native.core.Framing(made_up, timestamps.CORE)
    ours = native.core.Framing(prefix.CORE, timestamps.CORE)
    assert theirs.split_prefix("[worker3]: x") == (11, None, 3, None)
    assert ours.split_prefix("[worker3]: x") == (0, None, None, None)
    assert ours.split_prefix("[default3]: x") == (12, None, 3, None)
    later = native.core.Framing(prefix.CORE, dict(timestamps.CORE, reach=5))
    assert ours.line_stamp("x  2024-05-01 10:00:01") is None  # a letter first: no stamp
    assert ours.line_stamp("  2024-05-01 10:00:01") == 1714557601.0
    assert later.line_stamp("  2024-05-01 10:00:01") is None  # its dash lies past the declared reach
    with pytest.raises(ValueError, match="pattern"):
        native.core.Framing({"starts": "a", "brackets": [], "pad": 0}, timestamps.CORE)
    # the stamp is read by the shape it is handed (not a pattern of the core's): other brackets, labels
    angled = dict(timestamps.STAMP_SHAPE, opener="<", closer=">", label=3)
    other = native.core.Framing(prefix.CORE, dict(timestamps.CORE, shape=angled))
    assert other.line_stamp("<abc> <2024-05-01 10:00:01.5> x") == 1714557601.5
    assert ours.line_stamp("<abc> <2024-05-01 10:00:01.5> x") is None
    assert other.line_stamp("<abcd> 2024-05-01 10:00:01 x") is None  # (a label of 4: none at all)
    assert re.match(timestamps.stamp_regex(angled), "<abc> <2024-05-01 10:00:01.5> x")
    with pytest.raises(ValueError, match="stamp shape"):
        native.core.Framing(prefix.CORE, dict(timestamps.CORE, shape=dict(angled, closer="<")))


@settings(max_examples=3000, deadline=None)
@given(st.lists(st.sampled_from(["[", "]", " ", "\t", "2024-05-01", "T", " ", "10:00:01", ",", ".", "5", "123456789",
                                 "titan", "INFO", "-", ":", "é", "٣", "\u2003", "[2024-05-01 10:00:01"]), max_size=10))
def test_the_stamp_regex_made_of_the_shape_is_the_one_written_out(pieces) -> None:
    """LEADING is made of STAMP_SHAPE: it finds what the regex written out before the shape found,
    Unicode lines included (re reads those, not the core)."""
    from tuimon.parsers import timestamps

    line = "".join(pieces)
    written = re.compile(r"^\s*(?:\[[^\]\d]{1,16}\]\s*)?\[?(\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}(?:[.,]\d{1,9})?)")
    got, want = timestamps.LEADING.match(line), written.match(line)
    assert (got and got.span(1)) == (want and want.span(1)), line


def test_nemo2_epoch_counters_are_renumbered_by_the_core_from_the_declaration(tmp_path: Path, monkeypatch) -> None:
    """NeMo 2's progress printer counts iterations within an epoch ("Training epoch 2, iteration 5/49 |
    ... | global_step: 105 |"): the declaration's epoch form renumbers them through the run, in the
    core as in the hook; only the run's first line (it names the framework) goes to the hook."""
    from tuimon.engine import native
    from tuimon.engine.ingest import parse_file
    from tuimon.parsers import megatron
    from tuimon.parsers.columns import expand

    if native.core is None:
        pytest.skip(f"the compiled core is not importable ({native.name()})")
    lines = [f"Training epoch {s // 50}, iteration {s % 50}/49 | lr: 1e-05 | global_batch_size: 8 | "
             f"global_step: {s} | reduced_train_loss: {2.0 - s / 1000:.3f} | train_step_timing in s: 0.5"
             for s in range(120)]
    lines.append("Training epoch 0, iteration 7/9 | lr: 1e-05 | no step here: 1")  # the form unfinished: the mark's
    log = tmp_path / "nemo2.log"
    log.write_text("\n".join(lines) + "\n")
    hooked = []
    real = megatron.MegatronParser._iterations

    def counted(self, body, matches, ctx):
        hooked.append(ctx.line)
        return real(self, body, matches, ctx)

    monkeypatch.setattr(megatron.MegatronParser, "_iterations", counted)
    steps = {}
    compiled = native.core
    for engine, module in (("core", compiled), ("python", None)):
        before = native.use(module)
        try:
            hooked.clear()
            events = [e for e in expand(parse_file(log)[0]) if e.type == "iteration"]
        finally:
            native.use(before)
        steps[engine] = [(e.line, e.iteration, e.train_iters, e.losses) for e in events]
        if engine == "core":
            assert hooked == [1], hooked  # the first line alone (it names the run's framework)
    assert steps["core"] == steps["python"]
    assert steps["core"][105][1:3] == (105, 149)  # epoch 2 of 50 counters: done at 149 at least
    assert steps["core"][-1][1:3] == (7, 9)
