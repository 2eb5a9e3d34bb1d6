"""The synthetic corpus generator: its contract (what the pipeline reads) and its truth (what estimates are
scored against). Every expected value is worked out here independently of the generator's own bookkeeping:
counts are re-derived from the rendered events, rank-biserial by brute force, effects from sample means."""

from __future__ import annotations

import csv
import re
from collections import defaultdict
from pathlib import Path

import numpy as np
import orjson
import pytest

from pulse_pipeline.synth import (
    CONTROLS,
    EXPERIMENTS,
    FEEDBACK_REASONS,
    TASK_TYPES,
    simulate_sessions,
    true_arm_means,
    true_effects,
    write_corpus,
)

ISO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}$")
TEST_CMD = re.compile(r"pytest|npm test")
GIT_OPS = ("commit", "push", "pull", "reset", "rebase")
N_CORPUS = 500


def brute_rank_biserial(pos: np.ndarray, neg: np.ndarray) -> float:
    """P(X_pos > X_neg) - P(X_pos < X_neg) over all pairs (= 2U/(n1 n2) - 1 with ties as one half)."""
    diff = pos[:, None].astype(np.int64) - neg[None, :].astype(np.int64)
    return float((diff > 0).mean() - (diff < 0).mean())


@pytest.fixture(scope="module")
def big():
    return simulate_sessions(200_000, seed=7)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    out = tmp_path_factory.mktemp("corpus")
    summary = write_corpus(out, N_CORPUS, seed=5, sessions_per_file=200)
    sessions = {}
    for path in sorted(out.glob("sessions-*.jsonl")):
        for line in path.read_bytes().splitlines():
            rec = orjson.loads(line)
            sessions[rec["session_id"]] = rec
    ratings = [orjson.loads(line) for line in (out / "ratings.jsonl").read_bytes().splitlines()]
    # the corpus's ids carry its prefixes (corpus.py); the model's draws are the same
    table = simulate_sessions(
        N_CORPUS, seed=5, session_prefix=f"{summary.prefix}-", user_prefix=f"{summary.user_prefix}-"
    )
    return out, summary, sessions, ratings, table


# --------------------------------------------------------------------------------------------------------
# the files


def test_files_and_summary(corpus):
    out, summary, sessions, ratings, table = corpus
    names = sorted(p.name for p in out.iterdir())
    assert names == [
        "_sessions_truth.csv",
        "_truth.json",
        "assignments.csv",
        "ratings.jsonl",
        "sessions-0000.jsonl",
        "sessions-0001.jsonl",
        "sessions-0002.jsonl",
    ]
    assert summary.n_sessions == N_CORPUS == len(sessions)
    assert summary.n_users == round(N_CORPUS * 15000 / 36000)
    assert summary.n_rated == len({r["conversation_id"] for r in ratings})
    assert summary.n_events == sum(len(s["history"]) for s in sessions.values())
    assert summary.bytes_written == sum(p.stat().st_size for p in out.iterdir())
    assert len(summary.files) == len(names)


def test_determinism(tmp_path):
    a = write_corpus(tmp_path / "a", 120, seed=3, sessions_per_file=50)
    b = write_corpus(tmp_path / "b", 120, seed=3, sessions_per_file=50)
    write_corpus(tmp_path / "c", 120, seed=4, sessions_per_file=50)
    for fa, fb in zip(a.files, b.files, strict=True):
        assert fa.name == fb.name and fa.read_bytes() == fb.read_bytes()
    assert (tmp_path / "a" / "sessions-0000.jsonl").read_bytes() != (
        tmp_path / "c" / "sessions-0000.jsonl"
    ).read_bytes()
    x, y = simulate_sessions(3000, seed=11), simulate_sessions(3000, seed=11)
    assert np.array_equal(x.label, y.label) and np.array_equal(x.user_messages, y.user_messages)
    assert not np.array_equal(x.label, simulate_sessions(3000, seed=12).label)


def _ids(folder: Path) -> tuple[set[str], set[str]]:
    """(session ids, user ids) of a written corpus, read from its assignments file."""
    with open(folder / "assignments.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    return {r["session_id"] for r in rows}, {r["user_id"] for r in rows}


def test_two_default_corpora_share_no_id_and_the_same_command_writes_the_same_ids(tmp_path):
    """Issue 33: `pulse synth --seed 5` beside the demo replaced 200 of its sessions, because every corpus numbered
    sessions and users from s000001/u000001. Now the default prefix follows the seed and every other option."""
    a = write_corpus(tmp_path / "a", 40, seed=1)
    again = write_corpus(tmp_path / "again", 40, seed=1)
    other_seed = write_corpus(tmp_path / "b", 40, seed=2)
    other_size = write_corpus(tmp_path / "c", 41, seed=1)  # the same seed, one session more: another corpus
    sessions_a, users_a = _ids(tmp_path / "a")
    assert len(sessions_a) == 40
    assert _ids(tmp_path / "again") == (sessions_a, users_a) and again.prefix == a.prefix
    for other in ("b", "c"):
        sessions, users = _ids(tmp_path / other)
        assert not sessions & sessions_a and not users & users_a
    assert len({a.prefix, other_seed.prefix, other_size.prefix}) == 3
    assert re.fullmatch(r"c[0-9a-f]{8}", a.prefix) and a.user_prefix == a.prefix
    assert sessions_a == {f"{a.prefix}-s{k:06d}" for k in range(1, 41)}
    truth = orjson.loads((tmp_path / "a" / "_truth.json").read_bytes())
    assert (truth["id_prefix"], truth["user_prefix"]) == (a.prefix, a.prefix)


def test_a_prefix_given_makes_two_corpora_collide_on_purpose(tmp_path):
    write_corpus(tmp_path / "a", 30, seed=1, prefix="mine")
    write_corpus(tmp_path / "b", 20, seed=2, prefix="mine", user_prefix="people")
    sessions_a, users_a = _ids(tmp_path / "a")
    sessions_b, users_b = _ids(tmp_path / "b")
    assert sessions_b == {f"mine-s{k:06d}" for k in range(1, 21)} <= sessions_a
    assert all(u.startswith("mine-u") for u in users_a) and all(u.startswith("people-u") for u in users_b)
    ratings = [orjson.loads(line) for line in (tmp_path / "b" / "ratings.jsonl").read_bytes().splitlines()]
    assert ratings and all(r["id"].startswith("mine-r") and r["conversation_id"] in sessions_b for r in ratings)
    for bad in ("", "a,b", "-x", "x" * 41, "é"):
        with pytest.raises(ValueError, match="not usable in ids"):
            write_corpus(tmp_path / "bad", 5, prefix=bad)


def test_event_shape(corpus):
    _, _, sessions, _, _ = corpus
    for rec in sessions.values():
        h = rec["history"]
        assert [e["id"] for e in h] == list(range(len(h)))
        stamps = [e["timestamp"] for e in h]
        assert all(ISO.match(t) for t in stamps)
        assert stamps == sorted(stamps) and len(set(stamps)) == len(stamps)
        assert [e["extras"]["agent_state"] for e in h[:2]] == ["loading", "init"]
        by_id = {e["id"]: e for e in h}
        for e in h:
            if "observation" in e and e["observation"] in ("run", "edit", "read"):
                action = by_id[e["cause"]]
                assert action["action"] == e["observation"] and e["cause"] == e["id"] - 1
            if e.get("observation") == "run":
                code = e["extras"]["metadata"]["exit_code"]
                assert e["success"] == (code == 0) and e["extras"]["command"] == by_id[e["cause"]]["args"]["command"]
                assert e["message"] == f"Command `{e['extras']['command']}` executed with exit code {code}."
            if e.get("action") == "run":
                assert e["message"] == "Running command: " + e["args"]["command"]
                assert set(e["llm_metrics"]["accumulated_token_usage"]) == {"prompt_tokens", "completion_tokens"}
            if e.get("action") == "message":
                assert e["args"]["wait_for_response"] == (e["source"] == "agent")
                assert e["args"]["content"] == e["message"]


def _counts(history: list[dict]) -> dict[str, int]:
    """The table's counts, re-derived from the events the way a reader of OpenHands V0 would."""
    c: dict[str, int] = defaultdict(int)
    by_id = {e["id"]: e for e in history}
    for e in history:
        if e.get("action") == "message" and e["source"] == "user":
            c["user_messages"] += 1
        elif e.get("action") == "run":
            cmd = e["args"]["command"]
            for op in GIT_OPS:
                c[f"git_{op}"] += f"git {op}" in cmd
            c["test_runs"] += bool(TEST_CMD.search(cmd))
        elif e.get("action") == "edit":
            c["file_edits"] += 1
        elif e.get("observation") == "run" and e["extras"]["metadata"]["exit_code"] != 0:
            c["failed_commands"] += 1
            c["test_failures"] += bool(TEST_CMD.search(by_id[e["cause"]]["args"]["command"]))
        elif e.get("observation") == "agent_state_changed" and e["extras"]["agent_state"] in (
            "awaiting_user_input",
            "finished",
        ):
            c["n_segments"] += 1
    c["finished"] = int(history[-1]["extras"]["agent_state"] == "finished" and history[-2]["action"] == "finish")
    return c


def test_rendered_counts_match_table(corpus):
    _, _, sessions, _, table = corpus
    keys = ["user_messages", "n_segments", "test_runs", "test_failures", "failed_commands", "file_edits"]
    keys += [f"git_{op}" for op in GIT_OPS]
    for i, sid in enumerate(table.session_id):
        rec = sessions[sid]
        assert rec["user_id"] == table.user_id[i]
        got = _counts(rec["history"])
        want = {k: int(getattr(table, k)[i]) for k in keys}
        assert {k: got[k] for k in keys} == want, sid
        assert got["finished"] == int(table.finished[i])
    # the table is the CSV sidecar too
    with open(corpus[0] / "_sessions_truth.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert [r["session_id"] for r in rows] == table.session_id.tolist()
    assert [int(r["git_push"]) for r in rows] == table.git_push.tolist()
    assert np.allclose([float(r["label"]) for r in rows], table.label)
    assert sum(table.git_push) > 0 and sum(table.test_failures) > 0 and sum(table.git_rebase) > 0


def test_ratings_point_at_segment_ends_and_average_to_label(corpus):
    _, summary, sessions, ratings, table = corpus
    assert [r["id"] for r in ratings] == [f"{summary.prefix}-r{k:06d}" for k in range(1, len(ratings) + 1)]
    per_session: dict[str, list[int]] = defaultdict(list)
    for r in ratings:
        h = sessions[r["conversation_id"]]["history"]
        e = h[r["event_id"]]
        assert e["source"] == "agent" and e["action"] in ("message", "finish")
        # between a user message and the next closing state: the next event closes the segment, and the
        # last state before it, looking back, is a "running" opened after a user message
        assert h[e["id"] + 1]["extras"]["agent_state"] in ("awaiting_user_input", "finished")
        back = [x for x in h[: e["id"]] if x.get("observation") == "agent_state_changed" or x.get("action")]
        last_state = next(x for x in reversed(back) if x.get("observation") == "agent_state_changed")
        assert last_state["extras"]["agent_state"] == "running"
        assert h[last_state["id"] - 1]["source"] == "user"
        assert isinstance(r["rating"], int) and 1 <= r["rating"] <= 5
        assert r["reason"] is None or (r["rating"] <= 3 and r["reason"] in FEEDBACK_REASONS)
        assert ISO.match(r["created_at"]) and r["created_at"] > e["timestamp"]
        per_session[r["conversation_id"]].append(r["rating"])
    rated = set(table.session_id[table.rated].tolist())
    assert set(per_session) == rated
    for i in np.flatnonzero(table.rated):
        stars = per_session[table.session_id[i]]
        assert len(stars) == table.n_rated_segments[i]
        assert sum(stars) / len(stars) == table.label[i]


def test_assignments_csv(corpus):
    out, _, _, _, table = corpus
    with open(out / "assignments.csv", newline="") as fh:
        rows = list(csv.reader(fh))
    assert rows[0] == ["session_id", "experiment", "variant", "user_id"]
    body = rows[1:]
    assert len(body) == N_CORPUS and len({r[0] for r in body}) == N_CORPUS
    assert body == [list(t) for t in zip(table.session_id, table.experiment, table.variant, table.user_id, strict=True)]
    for _, experiment, variant, _ in body:
        assert variant in EXPERIMENTS[experiment]


def test_truth_sidecar(corpus):
    out, _, _, _, table = corpus
    doc = orjson.loads((out / "_truth.json").read_bytes())
    assert doc["seed"] == 5 and doc["scenario"] == "self_selected" and doc["n_sessions"] == N_CORPUS
    assert doc["rated_fraction"] == pytest.approx(table.rated.mean())
    rated = table.user_messages[table.rated]
    assert doc["rank_biserial_user_messages"] == pytest.approx(
        brute_rank_biserial(rated, table.user_messages[~table.rated])
    )
    for name, arms in EXPERIMENTS.items():
        e = doc["experiments"][name]
        assert e["arms"] == list(arms) and e["control"] == arms[0] == CONTROLS[name]
        means = true_arm_means(None, name)
        for arm in arms:
            assert e["true_arm_means"][arm]["stars"] == pytest.approx(means[arm])
            assert e["true_arm_means"][arm]["normalized"] == pytest.approx((means[arm] - 1) / 4)
            mask = table.variant == arm
            assert e["sample_arm_means"][arm]["n"] == mask.sum()
            assert e["sample_arm_means"][arm]["stars"] == pytest.approx(table.label[mask].mean())
        for arm in arms[1:]:
            assert e["true_effects"][arm]["stars"] == pytest.approx(means[arm] - means[arms[0]])
            assert e["true_effects"][arm]["normalized"] == pytest.approx((means[arm] - means[arms[0]]) / 4)


# --------------------------------------------------------------------------------------------------------
# the model


def test_table_invariants(big):
    s = big
    assert s.session_id[0] == "s000001" and len(s) == 200_000
    assert np.all(s.n_segments >= 1) and np.all(s.n_segments <= s.user_messages)
    assert np.all(s.test_failures <= s.test_runs) and np.all(s.failed_commands >= s.test_failures)
    assert np.all(np.abs(s.sentiment_score) <= 1)
    assert np.all((s.true_mean_rating >= 1) & (s.true_mean_rating <= 5))
    assert set(np.unique(s.task_type)) == set(TASK_TYPES)
    k = s.n_label_segments
    assert np.all(k >= 1) and np.all(k <= s.n_segments)
    first_k = np.arange(s.segment_ratings.shape[1])[None, :] < k[:, None]
    assert np.all((s.segment_ratings >= 1) == first_k) and np.all(s.segment_ratings <= 5)
    assert np.allclose(s.label, s.segment_ratings.sum(axis=1) / k)
    assert np.array_equal(s.n_rated_segments, np.where(s.rated, k, 0))
    assert np.mean(k[s.rated] <= 2) > 0.85  # rated sessions rate mostly 1-2 segments
    # E[label | session] is true_mean_rating: their means agree within a few standard errors
    assert abs(s.label.mean() - s.true_mean_rating.mean()) < 4 * (s.label - s.true_mean_rating).std() / 447


def test_marginals_match_the_paper(big):
    s = big
    assert 8 <= np.median(s.user_messages) <= 12
    assert 3.8 <= s.label.mean() <= 4.3
    assert 3.8 <= s.label[s.rated].mean() <= 4.3
    # chattier users are a bit less satisfied
    assert np.corrcoef(np.log(s.user_messages), s.label)[0, 1] < -0.05
    # the label goes with pushes and tone, against failures
    assert s.label[s.git_push > 0].mean() > s.label[s.git_push == 0].mean() + 0.1
    assert s.label[s.sentiment_score > 0.3].mean() > s.label[s.sentiment_score < -0.3].mean() + 0.5
    assert s.label[s.failed_commands == 0].mean() > s.label[s.failed_commands >= 5].mean() + 0.3


def test_n_users(big):
    s = simulate_sessions(3600, seed=1)
    assert np.unique(s.user_id).size == 1500  # round(3600 * 15000 / 36000), everyone opens a session
    assert np.unique(big.user_id).size == round(200_000 * 15000 / 36000)
    assert np.unique(simulate_sessions(500, seed=1, n_users=40).user_id).size == 40


def test_self_selection():
    s = simulate_sessions(20_000, seed=2)
    assert abs(s.rated.mean() - 0.05) < 0.01
    r = brute_rank_biserial(s.user_messages[s.rated], s.user_messages[~s.rated])
    assert 0.15 < r < 0.5
    # P(rated) rises with user messages and is a fixed function of them
    order = np.argsort(s.user_messages)
    assert np.all(np.diff(s.p_rated[order]) >= -1e-15)
    assert abs(s.p_rated.mean() - 0.05) < 0.01
    other = simulate_sessions(2000, seed=9)  # same function of M in another sample
    lookup = dict(zip(s.user_messages.tolist(), s.p_rated.tolist(), strict=True))
    assert all(lookup.get(m, p) == p for m, p in zip(other.user_messages.tolist(), other.p_rated.tolist(), strict=True))


def test_random_rating():
    s = simulate_sessions(20_000, seed=2, scenario="random")
    assert abs(s.rated.mean() - 0.05) < 0.01
    assert np.all(s.p_rated == 0.05)
    assert abs(brute_rank_biserial(s.user_messages[s.rated], s.user_messages[~s.rated])) < 0.08
    for variant in ("gpt-5", "show-plan", "max-step-60"):
        assert abs(s.rated[s.variant == variant].mean() - 0.05) < 0.02
    with pytest.raises(ValueError):
        simulate_sessions(10, scenario="volunteers")


def test_true_effects_match_large_sample(big):
    s = big
    for name, arms in EXPERIMENTS.items():
        truth = true_effects(None, name, normalized=False)
        control = s.label[s.variant == arms[0]]
        for arm in arms[1:]:
            treated = s.label[s.variant == arm]
            diff = treated.mean() - control.mean()
            se = np.sqrt(treated.var() / treated.size + control.var() / control.size)
            assert abs(diff - truth[arm]) < 4 * se, (arm, diff, truth[arm], se)
    # the documented default sizes, normalized
    assert -0.085 < true_effects(None, "llm-backbone")["gpt-5"] < -0.055
    assert 0.02 < true_effects(None, "planning")["show-plan"] < 0.04
    condenser = true_effects(None, "condenser")
    assert abs(condenser["max-step-80"]) < 0.005 and -0.03 < condenser["max-step-60"] < -0.01
    means = true_arm_means(None, "llm-backbone", normalized=True)
    assert means["gpt-5"] - means["claude-4-sonnet"] == pytest.approx(true_effects(None, "llm-backbone")["gpt-5"])


def test_effect_acts_through_features_and_directly(big):
    s = big
    m = s.experiment == "llm-backbone"
    gpt5 = s.variant[m] == "gpt-5"
    push, fails, fin = (s.git_push[m] > 0), s.test_failures[m], s.finished[m]
    assert push[gpt5].mean() < push[~gpt5].mean() - 0.05
    assert fails[gpt5].mean() > fails[~gpt5].mean() + 0.2
    assert fin[gpt5].mean() < fin[~gpt5].mean() - 0.04
    # label on the recorded features plus the arm: a clearly negative arm coefficient remains (direct part),
    # smaller in size than the raw difference (the rest is explained by the features)
    y = s.label[m]
    features = [
        np.log1p(getattr(s, f)[m])
        for f in (
            "git_commit",
            "git_push",
            "git_pull",
            "git_reset",
            "git_rebase",
            "test_runs",
            "test_failures",
            "failed_commands",
            "file_edits",
        )
    ]
    features += [s.finished[m].astype(float), s.sentiment_score[m], np.log(s.user_messages[m]), np.log(s.n_segments[m])]
    x = np.column_stack([np.ones(y.size), gpt5.astype(float), *features])
    beta, *_ = np.linalg.lstsq(x, y, rcond=None)
    resid = y - x @ beta
    se = np.sqrt(resid @ resid / (y.size - x.shape[1]) * np.linalg.inv(x.T @ x)[1, 1])
    raw = y[gpt5].mean() - y[~gpt5].mean()
    assert beta[1] < -5 * se
    assert raw < beta[1] < 0 and abs(beta[1]) < 0.8 * abs(raw)


def test_write_corpus_accepts_a_path_string_and_cleans_stale_files(tmp_path):
    write_corpus(tmp_path, 60, seed=1, sessions_per_file=20)
    assert len(list(tmp_path.glob("sessions-*.jsonl"))) == 3
    write_corpus(Path(str(tmp_path)), 30, seed=1, sessions_per_file=20)
    assert sorted(p.name for p in tmp_path.glob("sessions-*.jsonl")) == ["sessions-0000.jsonl", "sessions-0001.jsonl"]


def _followups(sessions: dict, table, mask: np.ndarray) -> list[str]:
    """English users' messages after the opening request, lower-cased, of the sessions in ``mask``."""
    return [
        e["message"].lower()
        for sid in table.session_id[mask & (table.language == "en")]
        for e in [e for e in sessions[sid]["history"] if e["source"] == "user"][1:]
    ]


def test_user_tone_follows_sentiment(corpus):
    """A follow-up is negative (level < 0) with probability Phi(-0.5 - words_tone * s): the share of follow-ups
    holding a negative reaction, unhappy (s < -0.3) over happy (s > 0.3) sessions, is that
    probability's ratio, up to the reactions a terse user leaves out (the same share in both groups) and noise."""
    from pulse_pipeline.synth.model import GeneratorParams, norm_cdf
    from pulse_pipeline.synth.render import _REACTIONS

    _, _, sessions, _, table = corpus
    negative = {p.lower().rstrip(".") for level in (-1, -2) for p in _REACTIONS[level]}
    stems = {p.split("{")[0][:18] for p in negative}  # templates end in {file}: match their fixed start

    def share(mask: np.ndarray) -> float:
        texts = _followups(sessions, table, mask)
        return sum(any(s in t for s in stems) for t in texts) / len(texts)

    tone = GeneratorParams().words_tone

    def expected(mask: np.ndarray) -> float:
        s = table.sentiment_score[mask & (table.language == "en")]
        return float(norm_cdf(-0.5 - tone * s).mean())

    unhappy, happy = table.sentiment_score < -0.3, table.sentiment_score > 0.3
    ratio, want = share(unhappy) / share(happy), expected(unhappy) / expected(happy)
    assert want > 1.4 and abs(ratio / want - 1) < 0.25, (ratio, want)
    assert set(table.language) > {"en"}


def test_opening_request_and_style_carry_no_mood():
    """The opening request is written before any outcome: the same random stream gives the same text whatever
    the session's mood. A user's style is a function of the user id alone."""
    import random

    from pulse_pipeline.synth.render import _user_text, session_specs, user_style

    table = simulate_sessions(50, seed=3)
    for spec in session_specs(table, seed=3)[:50]:
        texts = {
            _user_text(spec._replace(mood_location=m, sentiment_score=m), "first", random.Random(spec.session_id))
            for m in (-3.0, 0.0, 3.0)
        }
        assert len(texts) == 1
        assert user_style(spec.user_id) == user_style(str(spec.user_id))


def test_typos_are_single_edits():
    """With rate 1 every word of 4+ letters gets exactly one edit (swap, drop or double); shorter words none."""
    import random

    from pulse_pipeline.synth.render import _typos

    words = ["please", "update", "the", "changelog", "before", "release"]
    out = _typos(" ".join(words), 1.0, random.Random(1)).split()
    for a, b in zip(words, out, strict=True):
        if len(a) < 4:
            assert a == b
        elif len(b) == len(a):  # swap of neighbours
            assert b != a and sorted(b) == sorted(a)
        else:  # a letter dropped or doubled
            assert abs(len(b) - len(a)) == 1


def test_no_single_word_gives_the_label_away(corpus):
    """Words carry satisfaction only as many weak cues: no word in >= 5 % of the sessions has a presence whose
    correlation with the label exceeds 0.3 (bench/text_signal.py's top word at 1 000 labels is ~0.15-0.2; here
    500 sessions add ~0.045 of noise to each of ~200 words' r)."""
    _, _, sessions, _, table = corpus
    docs = [
        {
            w
            for e in sessions[sid]["history"]
            if e["source"] == "user"
            for w in re.findall(r"[a-z']+", e["message"].lower())
        }
        for sid in table.session_id
    ]
    vocab = {w for d in docs for w in d}
    y = table.label
    worst = 0.0
    for w in vocab:
        x = np.array([w in d for d in docs], dtype=np.float64)
        if 0.05 <= x.mean() <= 0.95:
            worst = max(worst, abs(float(np.corrcoef(x, y)[0, 1])))
    assert 0.05 < worst < 0.3
