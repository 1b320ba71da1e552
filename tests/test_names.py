"""Names you can tell apart (issue 27): the jobs table, compare legends and alerts cut a long
name where it says nothing that tells it from the others, at every width."""
from __future__ import annotations

import shutil

import pytest

from tests.conftest import loaded_session, shared_or_skip, until
from tuimon.figures.names import distinct_label, distinct_labels
from tuimon.ui.app import TuimonApp
from tuimon.ui.chart import overlay_lines

WS_RUNS = [f"sc22-stronghold_l-32_hs-2048_bs-4_ws-{ws}_2022-07-02.16567{n}" for ws, n in
           ((2, 42692), (4, 43137), (6, 43570), (8, 43979), (10, 44387), (12, 44774), (14, 45146), (15, 34808))]
BIGSCIENCE = ["bigscience-meg_ds_3d_gpt2_perf_n16-ds-off", "bigscience-meg_ds_3d_gpt2_perf_n16-ds-on",
              "bigscience-meg_ds_3d_gpt2_perf_n16-old"]


@pytest.mark.parametrize("width", [16, 20, 24, 34, 50])
def test_a_sweep_s_runs_keep_their_parameter_at_every_width(width):
    labels = distinct_labels(WS_RUNS, width)
    assert len(set(labels.values())) == len(WS_RUNS)
    for name, label in labels.items():
        assert len(label) <= width
        ws = name.split("_ws-")[1].split("_")[0]
        assert f"ws-{ws}" in label, (width, label)


@pytest.mark.parametrize("width", [10, 14, 20, 34])
def test_names_that_differ_at_their_end(width):
    labels = distinct_labels(BIGSCIENCE, width)
    assert len(set(labels.values())) == 3 and all(len(v) <= width for v in labels.values())
    assert [labels[n].rsplit("…", 1)[-1] for n in BIGSCIENCE] == ["off", "on", "old"]


def test_short_names_and_runs_of_a_file_stay_whole():
    assert distinct_label("oom-run", ["oom-run-2"], 34) == "oom-run"
    labels = distinct_labels(["thetagpu-cobalt-10143818", "thetagpu-cobalt-10143818#2"], 20)
    assert labels["thetagpu-cobalt-10143818#2"].endswith("10143818#2")


def test_the_compare_legend_tells_runs_apart():
    series = [(name, [1.0, 2.0, 3.0], [5.0, 6.0, 7.0]) for name in WS_RUNS[:4]]
    legend = overlay_lines(series, ["bold"] * 4, 100, 10)[-1].plain
    for name in WS_RUNS[:4]:
        assert "ws-" + name.split("_ws-")[1].split("_")[0] in legend, legend


@pytest.mark.parametrize("size", [(100, 30), (180, 50)])
async def test_the_jobs_table_tells_corpus_sweep_runs_apart(tmp_path, size):
    corpus = shared_or_skip("corpus/stronghold")
    for path in sorted(corpus.glob("sc22-stronghold_l-32_*.log")):
        shutil.copy(path, tmp_path / path.name)
    app = TuimonApp(loaded_session([tmp_path]))
    async with app.run_test(size=size) as pilot:
        table = app.screen.query_one("#jobs")
        await until(pilot, lambda: table.row_count == 8)
        names = [str(table.get_cell(key, "Job")) for key in table.rows]
        assert len(set(names)) == 8, names
        for key in table.rows:
            ws = key.value.split("_ws-")[1].split("_")[0]
            assert f"ws-{ws}" in str(table.get_cell(key, "Job")), names

