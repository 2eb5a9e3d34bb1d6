"""Settings files that are always there: PULSE_HOME's own file wins, else the package's shipped default, and the
resolver says which (issue 15: a new PULSE_HOME used to lose the control arms and every benchmark point)."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from pulse_pipeline.defs.estimates.resources import EstimatesResource
from pulse_pipeline.defs.features.resources import annotator_resource
from pulse_pipeline.estimates.benchmarks import build_benchmark_tables
from pulse_pipeline.features.rubric import load_rubric
from pulse_pipeline.features.wide import option_column
from pulse_pipeline.paths import DEFAULT_SOURCE, DEFAULTS, HOME_SOURCE, PulseHome
from pulse_pipeline.settings import FeatureSettings

PACKAGE_DEFAULTS = Path(__file__).resolve().parents[1] / "pulse_pipeline" / "defaults"


def _sessions(cluster: str, labels: dict[str, list[float]]) -> pl.DataFrame:
    """An assigned-sessions frame: every session rated and in ``cluster``; ``labels`` arm -> normalized ratings."""
    rows = [
        {
            "session_id": f"{arm}-{i}",
            "variant": arm,
            "labeled": True,
            "label": x,
            option_column("development_cluster", cluster): 1,
        }
        for arm, xs in labels.items()
        for i, x in enumerate(xs)
    ]
    return pl.DataFrame(rows)


def test_an_empty_home_uses_the_shipped_files(tmp_path: Path) -> None:
    home = PulseHome(tmp_path)
    assert DEFAULTS == PACKAGE_DEFAULTS
    assert home.experiments_file == (PACKAGE_DEFAULTS / "experiments.toml", DEFAULT_SOURCE)
    assert home.benchmarks_file == (PACKAGE_DEFAULTS / "benchmarks.csv", DEFAULT_SOURCE)
    resource = EstimatesResource(home=str(tmp_path))
    # the shipped experiments.toml names the demo's three controls
    assert resource.controls() == {
        "llm-backbone": "claude-4-sonnet",
        "planning": "no-plan",
        "condenser": "max-step-120",
    }
    assert resource.units() == {}
    assert resource.experiments_metadata() == {
        "experiments file": f"{PACKAGE_DEFAULTS / 'experiments.toml'} (shipped default; put your own at "
        f"{tmp_path / 'experiments.toml'})"
    }
    assert home.settings_lines()[1] == (
        f"benchmarks: {PACKAGE_DEFAULTS / 'benchmarks.csv'} (shipped default; put your own at "
        f"{tmp_path / 'benchmarks.csv'})"
    )


def test_benchmark_points_come_from_the_shipped_file(tmp_path: Path) -> None:
    """gpt-5 vs claude-4-sonnet in Testing code: ΔB 21.8 (paper Table 3); ΔH = 100 * (0.75 - 0.5) = 25 points."""
    resource = EstimatesResource(home=str(tmp_path))
    sessions = _sessions("Testing code", {"gpt-5": [0.75, 0.75], "claude-4-sonnet": [0.5, 0.5]})
    tables = build_benchmark_tables(resource.benchmarks_file().path, load_rubric(), sessions, min_ratings=2)
    assert tables.rejected_lines == 0
    used = tables.points.filter(pl.col("status") == "used").to_dicts()
    assert [(p["treatment"], p["control"], p["cluster"], p["delta_b"]) for p in used] == [
        ("gpt-5", "claude-4-sonnet", "Testing code", 21.8)
    ]
    assert used[0]["delta_h"] == 25.0
    # the other 13 shipped rows are there too, skipped for want of ratings, not rejected for want of a file
    assert tables.points.height == 14
    assert set(tables.points["status"]) == {"used", "skipped"}


def test_a_file_in_pulse_home_wins(tmp_path: Path) -> None:
    (tmp_path / "experiments.toml").write_text('[experiments.llm-backbone]\ncontrol = "gpt-5"\nunit = "user"\n')
    (tmp_path / "benchmarks.csv").write_text(
        "treatment,control,cluster,benchmark,delta_b,source\nclaude-4-sonnet,gpt-5,Testing code,Own,-3.5,\n"
    )
    home = PulseHome(tmp_path)
    assert home.experiments_file == (tmp_path / "experiments.toml", HOME_SOURCE)
    assert home.benchmarks_file == (tmp_path / "benchmarks.csv", HOME_SOURCE)
    resource = EstimatesResource(home=str(tmp_path))
    assert resource.controls() == {"llm-backbone": "gpt-5"}  # the shipped file is not merged in
    assert resource.units() == {"llm-backbone": "user"}
    assert resource.benchmarks_metadata() == {"benchmarks file": f"{tmp_path / 'benchmarks.csv'} (PULSE_HOME)"}
    sessions = _sessions("Testing code", {"claude-4-sonnet": [1.0], "gpt-5": [0.5]})
    points = build_benchmark_tables(resource.benchmarks_file().path, load_rubric(), sessions, min_ratings=1).points
    assert points.select("delta_b", "delta_h", "status").to_dicts() == [
        {"delta_b": -3.5, "delta_h": 50.0, "status": "used"}
    ]


def test_human_labels_fall_back_to_the_home_file(tmp_path: Path) -> None:
    home = PulseHome(tmp_path)
    assert annotator_resource(FeatureSettings(), home).human_labels_path is None
    (tmp_path / "human_labels.csv").write_text("session_id,task_type\ns1,Fix Bugs\n")
    assert annotator_resource(FeatureSettings(), home).human_labels_path == str(tmp_path / "human_labels.csv")
    configured = tmp_path / "elsewhere.csv"
    chosen = annotator_resource(FeatureSettings(human_labels_path=configured), home).human_labels_path
    assert chosen == str(configured)  # PULSE_HUMAN_LABELS wins
