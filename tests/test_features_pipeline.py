"""The feature stage through the Dagster assets: heuristic by default, the LLM against a fake server on loopback,
the judge skipped without an LLM, agreement between annotators, and a rubric entry reaching the wide table."""

from __future__ import annotations

import shutil
from pathlib import Path

import duckdb
import pytest

from pulse_pipeline.features.rubric import DEFAULT_RUBRIC, load_rubric
from pulse_pipeline.paths import PulseHome
from pulse_pipeline.runs import ingest, materialize
from pulse_pipeline.synth import write_corpus

pytestmark = pytest.mark.slow  # each test materializes the feature assets: 15 to 45 s


def _sql(home, query):
    with duckdb.connect(str(home.warehouse), read_only=True) as con:
        return con.execute(query).fetchall()


@pytest.fixture
def corpus(tmp_path):
    path = tmp_path / "corpus"
    write_corpus(path, 40, seed=21)
    return path


@pytest.fixture(scope="module")
def heuristic_built(tmp_path_factory) -> Path:
    """A home where the corpus above (same seed) was ingested with the default annotator and no LLM configured:
    the state two tests start from, built once for the module (a whole `pulse ingest`). Tests copy it (homes are
    relocatable: docs/moving-a-home.md) and never write into it."""
    root = tmp_path_factory.mktemp("heuristic")
    write_corpus(root / "corpus", 40, seed=21)
    with pytest.MonkeyPatch.context() as env:
        env.delenv("PULSE_LLM_MODEL", raising=False)
        env.delenv("PULSE_ANNOTATOR", raising=False)
        env.setenv("PULSE_HOME", str(root / "home"))
        env.setenv("DAGSTER_HOME", str(root / "home" / "dagster"))
        ingest(PulseHome.from_env().ensure(), root / "corpus", say=lambda _: None)
    return root / "home"


@pytest.fixture
def heuristic_home(heuristic_built, pulse_home) -> PulseHome:
    """This test's PULSE_HOME (``pulse_home``) holding a copy of ``heuristic_built``, times kept (as ``cp -a``)."""
    shutil.copytree(heuristic_built, pulse_home.root, symlinks=True, dirs_exist_ok=True)
    return pulse_home


def test_heuristic_by_default_and_judge_skipped_with_a_reason(heuristic_home):
    """The corpus ingested with no annotator or LLM set (``heuristic_built``): the heuristic annotates, the judge
    is skipped with its reason."""
    pulse_home = heuristic_home
    assert _sql(pulse_home, "SELECT annotator, count(*) FROM features.annotations GROUP BY 1") == [("heuristic", 40)]
    assert _sql(pulse_home, "SELECT count(*) FROM features.session_features") == [(40,)]
    assert _sql(pulse_home, "SELECT count(*) FROM features.judge_scores") == [(0,)]
    import dagster as dg

    record = dg.DagsterInstance.get().get_latest_materialization_event(dg.AssetKey(["features", "judge_scores"]))
    skipped = record.asset_materialization.metadata["skipped"].value
    assert skipped.startswith("skipped: no LLM configured")


def test_a_rubric_entry_reaches_the_wide_table(pulse_home, corpus, tmp_path, monkeypatch):
    rubric = tmp_path / "rubric.toml"
    rubric.write_text(
        DEFAULT_RUBRIC.read_text().replace('version = "paper-a2"', 'version = "team-v2"')
        + """
[[feature]]
name = "loop_behavior"
definition = "The same failed action repeated three or more times."
examples = ["runs the same failing test command again and again without changing anything"]
value_type = "yes_no"
prompt = "issues"
heuristic = "loop_behavior"
"""
    )
    monkeypatch.setenv("PULSE_RUBRIC", str(rubric))
    ingest(pulse_home, corpus, say=lambda _: None)
    cols = [r[0] for r in _sql(pulse_home, "SELECT column_name FROM (DESCRIBE features.session_features)")]
    assert "loop_behavior" in cols and cols.index("loop_behavior") == cols.index("scope_creep") + 1
    values = _sql(pulse_home, "SELECT DISTINCT value FROM features.annotation_values WHERE feature = 'loop_behavior'")
    assert {v for (v,) in values} <= {"YES", "NO"} and values


def test_llm_annotator_through_the_assets_with_cache_judge_and_agreement(heuristic_home, monkeypatch, fake_llm):
    pulse_home = heuristic_home  # the corpus ingested with the heuristic first
    monkeypatch.setenv("PULSE_ANNOTATOR", "llm")
    monkeypatch.setenv("PULSE_LLM_MODEL", "openai/fake-model")
    monkeypatch.setenv("PULSE_LLM_API_BASE", fake_llm.api_base)
    monkeypatch.setenv("PULSE_LLM_API_KEY", "sk-fake")
    # the features and what reads them: the analysts' copy is replaced only when every table is newer than its inputs
    materialize(pulse_home, "group:features+", say=lambda _: None)
    first = len(fake_llm.requests)
    with_messages = _sql(pulse_home, "SELECT count(*) FROM features.event_features WHERE user_message_count > 0")[0][0]
    # two annotation prompts and one judge prompt per session with a user message
    assert first == 3 * with_messages
    assert _sql(pulse_home, "SELECT annotator, count(*) FROM features.annotations GROUP BY 1 ORDER BY 1") == [
        ("heuristic", 40),
        ("llm", 40),
    ]
    assert _sql(pulse_home, "SELECT count(*) FROM features.judge_scores WHERE status = 'ok'") == [(with_messages,)]
    wide = _sql(pulse_home, "SELECT sentiment__negative, task_type__fix_bugs FROM features.session_features LIMIT 1")
    assert wide == [(1, 1)]  # the fake server's canned answer: Negative, Fix Bugs
    pairs = _sql(pulse_home, "SELECT DISTINCT annotator_a, annotator_b FROM features.annotator_agreement")
    assert pairs == [("heuristic", "llm")]
    n_features = len(load_rubric().features)
    assert _sql(pulse_home, "SELECT count(*) FROM features.annotator_agreement") == [(n_features,)]

    materialize(pulse_home, "group:features+", say=lambda _: None)  # warm cache: no call leaves the machine
    assert len(fake_llm.requests) == first


def test_llm_failures_spend_cap_and_totals_through_the_asset(pulse_home, corpus, monkeypatch, fake_llm):
    """Through `pulse materialize`: a rate limit is retried, a malformed answer is re-asked, and the spend cap
    stops new calls; the statuses land in the table and the totals in the asset's metadata."""
    import dagster as dg

    from .fake_llm import Reply

    for name, value in {
        "PULSE_ANNOTATOR": "llm",
        "PULSE_LLM_MODEL": "openai/fake-model",
        "PULSE_LLM_API_BASE": fake_llm.api_base,
        "PULSE_LLM_API_KEY": "sk-fake",
        "PULSE_LLM_CONCURRENCY": "1",  # one request at a time, so the scripted replies land in order
        "PULSE_LLM_INPUT_COST_PER_TOKEN": "0.001",  # the fake server reports 100 + 20 tokens: $0.10 + $0.02
        "PULSE_LLM_OUTPUT_COST_PER_TOKEN": "0.001",
        "PULSE_LLM_SPEND_CAP_USD": "1.0",  # $1 at $0.12 a call: 9 calls are paid for, the 10th would exceed it
    }.items():
        monkeypatch.setenv(name, value)
    fake_llm.push(Reply(status=429), Reply(content="not json at all"))
    ingest(pulse_home, corpus, say=lambda _: None)

    # the 429 costs a request but no money; every 200 answer is paid for, the malformed one (re-asked) included:
    # after 9 paid answers, 9 x $0.12 = $1.08 >= $1.00, so no further request is sent
    annotation_requests = len(fake_llm.prompts("analysis")) + len(fake_llm.prompts("issues"))
    assert annotation_requests == 1 + 9
    assert len(fake_llm.prompts("judge")) == 9  # the judge has its own budget, under the same cap
    statuses = dict(_sql(pulse_home, "SELECT status, count(*) FROM features.annotations GROUP BY 1"))
    assert statuses["failed"] > 0 and sum(statuses.values()) == 40
    capped = _sql(pulse_home, "SELECT count(*) FROM features.annotations WHERE error LIKE '%spend cap%'")[0][0]
    assert capped == statuses["failed"]
    meta = dg.DagsterInstance.get().get_latest_materialization_event(dg.AssetKey(["features", "annotations"]))
    totals = meta.asset_materialization.metadata
    assert totals["llm_calls"].value == 10 and abs(totals["llm_cost_usd"].value - 9 * 0.12) < 1e-9
