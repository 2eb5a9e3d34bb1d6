"""Issue 36, the modeling part: one cross-validation engine, the in-sample comparison model as a modeling table, one
writer of the per-session bookkeeping, and the modeling stage's tables named through the contract.

- Table 2 (``comparison.compare_models``), the stack and the single-family cross-validation and cross-fit all fit
  through the one fold loop, ``cv.fit_folds`` (a spy counts its calls per family), and give the same numbers.
- No module of the modeling stage imports a private name (``_x``) from another module, scikit-learn's included.
- ``modeling.insample_predictions`` holds, session for session, what one model of the chosen family fit on every
  rating predicts, computed here independently on the whole matrix (every session's text at once), after a fit and
  after a run that kept the fit; the estimates stage reads it and no longer loads the modeling data.
- ``staging.computed_versions`` is written by ``incremental.py`` only; its ``record_all``, ``forget`` and
  ``recorded_under`` checked on rows written by hand.
"""

from __future__ import annotations

import ast
import re
from datetime import timedelta
from pathlib import Path

import duckdb
import numpy as np
import polars as pl
import pytest

import pulse_pipeline
from pulse_pipeline import incremental, tables
from pulse_pipeline.modeling import crossfit, cv, stack, workers
from pulse_pipeline.modeling.comparison import compare_models
from pulse_pipeline.modeling.data import ModelingData, load_modeling_data
from pulse_pipeline.modeling.insample import insample_table, load_insample_predictions
from pulse_pipeline.modeling.ordinal import checked_sample_weight
from pulse_pipeline.modeling.reuse import refresh_models
from pulse_pipeline.stars import stars_to_label
from pulse_pipeline.warehouse import Warehouse

from .test_modeling_reuse import T0, add_session, corpus_warehouse

PACKAGE = Path(pulse_pipeline.__file__).parent
MODELING_FILES = sorted(
    [*(PACKAGE / "modeling").glob("*.py"), *(PACKAGE / "defs" / "modeling").glob("*.py"), PACKAGE / "incremental.py"]
)


def signal(n: int = 80, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Ratings 1-5 from a linear signal in 4 columns plus noise."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 4))
    return X, np.clip(np.round(3 + X[:, :3].sum(axis=1) + rng.normal(scale=0.7, size=n)), 1, 5)


# --------------------------------------------------------------------------------------------------------
# one engine


@pytest.fixture
def fold_loop_calls(monkeypatch) -> list[tuple[str, int]]:
    """(family, seed) of every ``cv.fit_folds`` call, the fits run in this process (where the spy is)."""
    calls: list[tuple[str, int]] = []
    real = cv.fit_folds

    def spy(X, y, Xu, family, folds, seed, *args, **kwargs):
        calls.append((family, seed))
        return real(X, y, Xu, family, folds, seed, *args, **kwargs)

    monkeypatch.setattr(cv, "fit_folds", spy)
    monkeypatch.setattr(workers, "MIN_ROWS", 10**9)
    return calls


def test_table_2_the_stack_and_the_cross_fit_all_fit_through_the_one_fold_loop(fold_loop_calls):
    X, y = signal()
    alone = crossfit.cross_validate(X, y, "ordinal_logit", seeds=(42, 43))
    assert fold_loop_calls == [("ordinal_logit", 42), ("ordinal_logit", 43)]
    fold_loop_calls.clear()
    fit = crossfit.crossfit_predict(X[:60], y[:60], X[60:], "hist_gbm", seed=42)
    assert fold_loop_calls == [("hist_gbm", 42)]
    fold_loop_calls.clear()
    both = ["hist_gbm", "ordinal_logit"]
    results = {r.family: r for r in stack.cross_validate_all(X[:60], y[:60], both, seeds=(42,))}
    assert sorted(fold_loop_calls) == [("hist_gbm", 42), ("ordinal_logit", 42)]
    fold_loop_calls.clear()
    stack.stack_crossfit_predict(X[:60], y[:60], X[60:], both, seed=42)
    assert sorted(fold_loop_calls) == [("hist_gbm", 42), ("ordinal_logit", 42)]
    fold_loop_calls.clear()
    data = ModelingData(("a", "b", "c", "d"), np.array([f"s{i:02d}" for i in range(80)]), X, y)
    comparison = compare_models(data, pl.DataFrame(), ["ordinal_logit", "hist_gbm"], (42, 43), 5, "pearson")
    assert sorted(fold_loop_calls) == [("hist_gbm", 42), ("hist_gbm", 43), ("ordinal_logit", 42), ("ordinal_logit", 43)]
    # one loop, one set of numbers: Table 2's rows are the single-family cross-validation's, and the stack's
    # cross-validation of seed 42 holds the cross-fit's out-of-fold predictions
    ordinal = next(r for r in comparison.rows if r.model == "ordinal_logit" and r.metric == "pearson")
    assert ordinal.mean == alone.metric("pearson").mean and ordinal.sd == alone.metric("pearson").sd
    np.testing.assert_array_equal(results["hist_gbm"].oof, fit.oof)


def test_no_modeling_module_imports_a_private_name():
    offenders = []
    for path in MODELING_FILES:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                offenders += [
                    f"{path.relative_to(PACKAGE)}:{node.lineno} {node.module}.{a.name}"
                    for a in node.names
                    if a.name.startswith("_") and a.name != "__future__"
                ]
    assert offenders == []


@pytest.mark.parametrize("weights", [None, 2.5, [1, 0, 3, 2, 2, 1], np.array([0.5, 1, 1, 2, 0, 1], dtype=np.float32)])
def test_the_ordinal_logits_sample_weights_are_read_as_scikit_learn_reads_them(weights):
    from sklearn.utils.validation import _check_sample_weight  # the reference: private there, read by this test only

    want = _check_sample_weight(weights, np.zeros((6, 2)), dtype=np.float64, ensure_non_negative=True)
    got = checked_sample_weight(weights, 6)
    assert got.dtype == np.float64 and np.array_equal(got, want)


@pytest.mark.parametrize(
    ("weights", "why"),
    [([1, -1, 1, 1, 1, 1], "negative"), ([1, 1, 1], r"one weight per row \(6\)"), ([1, np.nan, 1, 1, 1, 1], "NaN")],
)
def test_bad_sample_weights_are_refused_with_the_reason(weights, why):
    with pytest.raises(ValueError, match=why):
        checked_sample_weight(weights, 6)


# --------------------------------------------------------------------------------------------------------
# the in-sample comparison model as a table


def whole_matrix_insample(wh: Warehouse) -> dict[str, float]:
    """What the estimates stage's in-sample rows were computed from, done the plain way: every session's text at
    once, one ``insample_predict`` of the chosen family, fitted values of the rated and predictions of the unrated
    sessions on the 0-1 scale."""
    family = wh.con.execute(f"SELECT DISTINCT model FROM {tables.CV_METRICS.qualified} WHERE chosen").fetchone()[0]
    every = load_modeling_data(wh, text_of="all")
    lab = every.labeled
    fit = crossfit.insample_predict(every.X[lab], every.y[lab], every.X[~lab], family, text=every.text_feature())
    want = dict(zip(every.session_ids[lab], stars_to_label(fit.oof), strict=True))
    want.update(zip(every.session_ids[~lab], stars_to_label(fit.unlabeled), strict=True))
    return want


@pytest.fixture(scope="module")
def modeled(tmp_path_factory):
    """A warehouse of 200 sessions (120 rated) fitted with families that have a single in-sample model, then a
    small drop (a kept fit's run); the in-sample table and the plain computation after each."""
    folder = tmp_path_factory.mktemp("models")
    wh, sessions = corpus_warehouse()
    settings = {"families": ["ordinal_logit", "text"], "seeds": (42,), "folds": 5, "choose_by": "pearson"}
    first = refresh_models(wh, folder, **settings, seed_rows=0, refit_share=0.1, now=T0)
    fitted = (wh.frame(f"SELECT * FROM {tables.INSAMPLE_PREDICTIONS.qualified}"), whole_matrix_insample(wh))
    for sid in ("s000", "s150"):  # two copies: one rated, one not
        features, messages, stars = sessions[sid]
        add_session(wh, f"{sid}-copy", features, messages, stars)
    second = refresh_models(wh, folder, **settings, seed_rows=0, refit_share=0.1, now=T0 + timedelta(hours=1))
    kept = (wh.frame(f"SELECT * FROM {tables.INSAMPLE_PREDICTIONS.qualified}"), whole_matrix_insample(wh))
    return wh, first, second, fitted, kept


def test_the_modeling_step_stores_the_in_sample_models_predictions(modeled):
    wh, first, _, (rows, want), _ = modeled
    assert first.reused is None and first.comparison.chosen.family in ("ordinal_logit", "text")
    assert rows.height == 200 and rows["labeled"].sum() == 120
    assert set(rows["model"]) == {first.comparison.chosen.family}
    assert dict(zip(rows["session_id"], rows["prediction"], strict=True)) == want  # bit for bit
    np.testing.assert_array_equal(rows["prediction"].to_numpy(), stars_to_label(rows["prediction_stars"].to_numpy()))


def test_a_run_that_keeps_the_fit_refits_the_in_sample_model_on_todays_ratings(modeled):
    wh, _, second, _, (rows, want) = modeled
    assert second.reused is not None, second.reason
    assert rows.height == 202 and {"s000-copy", "s150-copy"} <= set(rows["session_id"])
    assert dict(zip(rows["session_id"], rows["prediction"], strict=True)) == want
    assert load_insample_predictions(wh) == want  # what the estimates stage reads


def test_the_stack_or_no_chosen_model_has_no_in_sample_rows(modeled):
    wh = modeled[0]
    assert insample_table(wh, stack.STACK).is_empty() and insample_table(wh, None).is_empty()
    empty = Warehouse(duckdb.connect())
    assert load_insample_predictions(empty) is None  # no ppi_insample rows


def test_the_estimates_stage_reads_the_table_instead_of_fitting():
    source = (PACKAGE / "defs" / "estimates" / "assets.py").read_text()
    imported = {node.module for node in ast.walk(ast.parse(source)) if isinstance(node, ast.ImportFrom) and node.module}
    assert not {m for m in imported if m.endswith(("modeling.data", "modeling.crossfit", "modeling.stack"))}
    assert "load_insample_predictions(wh)" in source and not re.search(r"(?<!load_)insample_predictions\(", source)


# --------------------------------------------------------------------------------------------------------
# one writer of the bookkeeping


def test_only_incremental_writes_the_bookkeeping():
    """Every INSERT, DELETE or UPDATE of ``staging.computed_versions`` in the package. The one other is the
    contract's recreation of a table in a newer shape, which forgets that table's bookkeeping before any
    ``Warehouse`` exists (``warehouse.py``, ``_forget_computed``; ``contract.py`` once split)."""
    names = r"(staging\.computed_versions|\{(bookkeeping|tables\.COMPUTED_VERSIONS)\.qualified\})"
    write = re.compile(rf"(INSERT\s+INTO|DELETE\s+FROM|UPDATE)\s+{names}", re.IGNORECASE)
    writers = {
        str(path.relative_to(PACKAGE))
        for path in PACKAGE.rglob("*.py")
        if write.search(path.read_text()) and path.name not in ("warehouse.py", "contract.py")
    }
    assert writers == {"incremental.py"}


@pytest.fixture
def staged() -> Warehouse:
    wh = Warehouse(duckdb.connect())
    wh.con.execute("INSERT INTO raw.drops (drop_id, fingerprint) VALUES ('d', 'f')")
    for sid in ("a", "b", "c"):
        wh.con.execute("INSERT INTO staging.sessions (record_key, session_id, drop_id) VALUES (?, ?, 'd')", [sid, sid])
    return wh


def test_record_all_forget_and_recorded_under(staged):
    versions = "SELECT session_id, 'v-' || session_id AS version FROM staging.sessions"
    incremental.record_all(staged, "t1", versions, depends_on="#fit1")
    incremental.record_all(staged, "t2", versions)
    stored = staged.frame(
        f"SELECT table_name, session_id, version FROM {tables.COMPUTED_VERSIONS.qualified} ORDER BY ALL"
    ).rows()
    assert stored == [("t1", s, f"v-{s}#fit1") for s in "abc"] + [("t2", s, f"v-{s}") for s in "abc"]
    assert incremental.recorded_under(staged, "t1", "#fit1") == (3, 0)
    assert incremental.recorded_under(staged, "t1", "#fit2") == (3, 3)
    assert incremental.forget(staged, "t1") == 3
    assert incremental.recorded_under(staged, "t1", "#fit1") == (0, 0)
    assert incremental.recorded_under(staged, "t2", "") == (3, 0)  # another key's rows stay


# --------------------------------------------------------------------------------------------------------
# table names through the contract


def literal_table_names(path: Path, names: set[str]) -> list[str]:
    """``file:line name`` of every contract table named literally in a string of ``path`` that is not a docstring
    (a bare string statement); f-strings' literal parts count."""
    tree = ast.parse(path.read_text())
    docs = {
        id(node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)
    }
    pattern = re.compile(r"\b(raw|staging|features|modeling|estimates)\.[a-z_]+\b")
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
            found += [f"{path.name}:{node.lineno} {m.group(0)}" for m in pattern.finditer(node.value)]
    return sorted({f for f in found if f.split(" ")[1] in names})


def test_the_modeling_stage_names_its_tables_through_the_contract():
    names = {t.qualified for t in tables.ALL_TABLES} | {tables.SESSION_FEATURES.qualified}
    # modeling/text.py reads the users' messages: its query moves to features.user_text (issue 36, another part)
    files = [p for p in MODELING_FILES if p.name != "text.py"]
    assert [hit for p in files for hit in literal_table_names(p, names)] == []
