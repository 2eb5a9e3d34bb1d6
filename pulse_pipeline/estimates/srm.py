"""Sample-ratio mismatch: were the arms of each experiment filled in the proportions intended?

A split that drifts from its design (a bug in assignment, a crash that drops one arm's sessions, bots in one arm)
biases every comparison in the experiment, whatever the estimator. Experimentation platforms therefore test the
assignment counts first: a chi-squared goodness of fit against the intended shares, alarming at p < 0.001.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..stats.two_sample import sample_ratio_test
from .experiments import read_splits

ALARM_P = 0.001


@dataclass(frozen=True)
class SrmRow:
    """One row of ``estimates.srm_check``: one arm of one experiment, with the experiment's test."""

    experiment: str
    arm: str
    sessions: int
    intended_share: float
    expected_sessions: float
    observed_share: float
    chi2: float
    p_value: float
    mismatch: bool
    note: str | None


def intended_splits(path: Path) -> tuple[dict[str, dict[str, float]], str | None]:
    """The splits ``experiments.toml`` configures, and None; or, when a split there is unusable, no splits and why.

    A bad split does not stop the check: every experiment is then tested against equal shares, and the reason
    goes into every row's note.
    """
    try:
        return read_splits(path), None
    except ValueError as exc:
        return {}, f"{exc}; tested against equal shares"


def srm_rows(
    counts: dict[str, dict[str, int]], splits: dict[str, dict[str, float]], split_problem: str | None = None
) -> list[SrmRow]:
    """Rows of ``estimates.srm_check``.

    ``counts``: experiment -> arm -> assigned sessions; ``splits``: experiment -> arm -> intended weight (an
    experiment without one is meant to split equally). An arm the split names but the data lack counts 0; an arm
    the data have but the split omits is tested against share 0, which always flags the mismatch, and says so.
    ``split_problem`` (from :func:`intended_splits`) is added to every row's note.
    """
    rows: list[SrmRow] = []
    for experiment in sorted(counts):
        observed = dict(counts[experiment])
        weights = splits.get(experiment)
        notes = []
        if weights is None:
            weights = dict.fromkeys(observed, 1.0)
        else:
            for arm in weights:
                observed.setdefault(arm, 0)
            unplanned = sorted(a for a in observed if a not in weights)
            if unplanned:
                notes.append(f"arm(s) {', '.join(unplanned)} not in the configured split")
        arms = sorted(observed)
        total_weight = sum(weights.get(a, 0.0) for a in arms)
        shares = [weights.get(a, 0.0) / total_weight for a in arms]
        total = sum(observed.values())
        chi2 = p = float("nan")
        if len(arms) < 2:
            notes.append("single-arm experiment: no split to test")
            mismatch = False
        elif any(share == 0 for share in shares):
            mismatch = True  # sessions in an arm meant to get none: a mismatch whatever the counts
        else:
            result = sample_ratio_test([observed[a] for a in arms], shares)
            chi2, p = result.statistic, result.p_value
            mismatch = bool(p < ALARM_P)
            if result.note:
                notes.append(result.note)
        if split_problem:
            notes.append(split_problem)
        note = "; ".join(notes) or None
        for arm, share in zip(arms, shares, strict=True):
            rows.append(
                SrmRow(
                    experiment=experiment,
                    arm=arm,
                    sessions=observed[arm],
                    intended_share=share,
                    expected_sessions=share * total,
                    observed_share=observed[arm] / total if total else float("nan"),
                    chi2=chi2,
                    p_value=p,
                    mismatch=mismatch,
                    note=note,
                )
            )
    return rows
