"""PULSE's own conclusion for each comparison: the method it is read by, why, and the sentence.

``estimates.experiment_effects`` holds every method's answer; this module decides which one a comparison is read
by and says what it lets one conclude, so the report, the UI and an analyst querying the warehouse all read the
same decision (``estimates.conclusions``, one row per comparison).

The rule (``choose``): stratified PPI++ when it has strata and it and PPI++ are valid and not flagged (issue 40:
its validation kept coverage and was never wider than PPI++); else PPI++ when it is valid and not flagged (the
narrowest of the trustworthy estimates); else AIPW when it is valid and not flagged (rated sessions unlike the
rest: AIPW corrects for who rates); else the naive Welch difference; no conclusion when no method has a valid
number.

The verdict (``verdict``): the chosen estimate's 95 % interval excludes zero or not. When it does, and the run has
more than one comparison, Holm's adjusted p (``experiment_effects.with_holm``, per method over every comparison)
of 0.05 or more is a caveat: the difference does not survive the correction. When the interval holds zero, the
minimum detectable effect of the chosen kind of estimate (``estimates.power``: PPI's for PPI and cross-PPI, the
naive one otherwise) says how large a difference the test could have seen.

Beside the conclusion, its width (``width``): a model-assisted interval's width as a multiple of the naive
Welch interval's (``experiment_effects.width_vs_naive``). The rule above is fixed before the data, so the chosen
interval may come out wider than naive; the sentence then says so and why (``why_wider``: the propensity weights
vary, or the predictions miss the ratings by more than the ratings vary, as AIPW's note records them
(``stats.aipw.WEIGHTS_VARY``, ``PREDICTIONS_MISS``); for PPI++ and cross-PPI, how weakly the predictions track the
ratings out of fold).

An observational comparison (``design``: arms from a session field, not randomized: ``field_arms.py``) is read
by the same rule, but its sentence states an association: "sessions with X are rated higher than sessions with
Y", then that it is not the effect of X (the arms may differ in who used them and for what), never that X made
users happier; its verdict says "(associational)".

The decision beside each conclusion (``decisions.decide``, the rule of docs/decisions.md): ship, hold, keep
collecting or no decision, read from the chosen estimate and the comparison's guardrails.

Numbers in the sentence are written as the report writes them (``wording.number``, ``wording.in_stars``): effects
in stars are 4 x the 0-1 difference (``stars.label_difference_in_stars``), 2 decimals.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from ..stats.aipw import PREDICTIONS_MISS, WEIGHTS_VARY
from .decisions import Decision, decide, guardrail_clause, last_look
from .experiments import OBSERVATIONAL, RANDOMIZED
from .methods import Method, method_label
from .wording import HIGHER, LOWER, NOTHING_TO_COMPARE, in_stars, missing, number

SIGNIFICANT = 0.05  # Holm's adjusted p below this keeps a difference whose interval excludes zero


@dataclass(frozen=True, kw_only=True)
class ConclusionRow:
    """One row of ``estimates.conclusions``: what one comparison lets one conclude.

    A single-arm experiment has a row too (``treatment`` None, no method): it is listed as not compared."""

    experiment: str
    treatment: str | None
    control: str
    method: str | None  # the Method the comparison is read by; None: no method has a valid estimate
    why: str  # why that method (and, with none, the rows' notes)
    effect: float | None = None  # the chosen estimate on the 0-1 label scale
    ci_low: float | None = None
    ci_high: float | None = None
    width_vs_naive: float | None = None  # its interval's width divided by naive Welch's
    direction: str | None = None  # "higher" / "lower" when the interval excludes zero; None when it holds zero
    p_holm_caveat: float | None = None  # Holm's adjusted p when the interval excludes zero but Holm does not keep it
    mde: float | None = None  # when the interval holds zero: the smallest effect the test detects (80 % power)
    verdict: str  # the conclusion in a few words
    sentence: str  # the conclusion in one plain sentence, the method and why in parentheses
    design: str = RANDOMIZED  # the experiment's design: RANDOMIZED, or OBSERVATIONAL (an association)
    decision: str = ""  # SHIP, HOLD, KEEP_COLLECTING or NO_DECISION (``decide``: docs/decisions.md)
    decision_why: str = ""  # why, in one sentence, naming each failing guardrail
    guardrails_passed: int = 0  # the comparison's rows of estimates.guardrails by verdict
    guardrails_failed: int = 0
    guardrails_inconclusive: int = 0  # inconclusive, or not estimable (verdict NULL)


ASSOCIATIONAL = (
    "; an association, not the effect of {treatment}: the arms come from a session field, not from randomization,"
    " and their sessions may differ in who ran them and on what"
)
"""What an observational comparison's sentence adds after its numbers (``sentence``)."""


# ---------------------------------------------------------------- the rule


def choose(rows: Sequence[Mapping]) -> tuple[Mapping | None, str]:
    """The estimate to read a comparison by (one of ``rows``, its ``estimates.experiment_effects`` rows), and why:
    stratified PPI++ when it and PPI++ are valid and not flagged and it has strata (its numbers differ from
    PPI++'s; without strata it is PPI++ and PPI++ is named); PPI when it is valid and not flagged (narrowest of
    the trustworthy ones); AIPW when PPI is flagged (rated sessions unlike the rest: AIPW corrects for who rates);
    else the naive difference. None when no method has a valid number.

    Why stratified first (issue 40): it rests on PPI++'s assumption within each stratum (so it is read only when
    PPI++ itself is unflagged), and its validation (``studies/stratified.py``, docs/stratified.md, 500
    replications each) kept coverage at 95.4 % and 95.6 % with an interval 0.87 x PPI++'s where the model's
    quality differs by stratum and 1.00 x where strata are alike: never wider, so reading it loses nothing."""
    by = {r["method"]: r for r in rows if r["valid"] and not missing(r["effect"])}
    ppi, stratified = by.get(Method.PPI), by.get(Method.PPI_STRATIFIED)
    unflagged = ppi is not None and not ppi["flags"] and stratified is not None and not stratified["flags"]
    if unflagged and (stratified["effect"], stratified.get("se")) != (ppi["effect"], ppi.get("se")):
        return stratified, "stratified PPI++ (a lambda per stratum) is valid and not flagged"
    if Method.PPI in by and not by[Method.PPI]["flags"]:
        return by[Method.PPI], "PPI++ is valid and not flagged"
    if Method.AIPW in by and not by[Method.AIPW]["flags"]:
        why = f"PPI++ is flagged: {by[Method.PPI]['flags']}" if Method.PPI in by else "PPI++ has no valid estimate"
        return by[Method.AIPW], f"{why}; AIPW corrects for who rates"
    if Method.NAIVE_WELCH in by:
        return by[Method.NAIVE_WELCH], "no model-assisted estimate is valid and unflagged"
    return None, "no method has a valid estimate"


@dataclass(frozen=True)
class Verdict:
    """What a comparison lets one conclude, read from the estimate ``choose`` picks."""

    chosen: Mapping | None
    why: str
    direction: str | None  # "higher" / "lower" when the 95 % interval excludes zero, None when it holds zero
    holm_p: float | None  # Holm's adjusted p when the interval excludes zero but the correction does not

    @property
    def short(self) -> str:
        """The conclusion in a few words (the report's summary table)."""
        if self.chosen is None:
            return "no conclusion"
        treatment = str(self.chosen["treatment"])
        if self.direction is None:
            return "no detectable difference"
        text = f"{treatment} rated {self.direction}"
        return text + " (not after Holm's correction)" if self.holm_p is not None else text


def verdict(rows: Sequence[Mapping], n_comparisons: int) -> Verdict:
    """The chosen estimate (``choose``), whether its interval excludes zero, and whether Holm's correction over
    the run's ``n_comparisons`` comparisons keeps it."""
    chosen, why = choose(rows)
    if chosen is None:
        return Verdict(None, why, None, None)
    low, high = chosen["ci_low"], chosen["ci_high"]
    if missing(low) or missing(high) or low <= 0 <= high:
        return Verdict(chosen, why, None, None)
    holm = chosen["p_holm"]
    caveat = n_comparisons > 1 and not missing(holm) and holm >= SIGNIFICANT
    return Verdict(chosen, why, HIGHER if chosen["effect"] > 0 else LOWER, holm if caveat else None)


def detectable(method: str, power: Mapping | None) -> float | None:
    """The minimum detectable effect (0-1, 80 % power) of the kind of estimate ``method`` is, from the
    comparison's ``estimates.power`` row: PPI's for PPI, cross-PPI and stratified PPI (no more than PPI's), the
    naive one for any other."""
    if power is None:
        return None
    mde = power["mde_ppi"] if method in (Method.PPI, Method.CROSSPPI, Method.PPI_STRATIFIED) else power["mde_naive"]
    return None if missing(mde) else mde


# ---------------------------------------------------------------- the width against naive


MODEL_ASSISTED = (Method.PPI, Method.CROSSPPI, Method.AIPW, Method.PPI_STRATIFIED)
"""The methods whose interval uses the predictions: the ones whose width against naive the sentence states."""


def why_wider(chosen: Mapping) -> str:
    """Why the chosen model-assisted interval (an ``estimates.experiment_effects`` row) is wider than naive's.

    AIPW: what its note records (``stats.aipw.aipw_mean``): the propensity weights vary (fewer ratings count
    fully), the predictions miss the ratings by more than the ratings vary (the correction adds more variance than
    the predictions remove). PPI++ and cross-PPI: the predictions track the ratings weakly (out-of-fold r), and
    their lambda, tuned per arm, is estimated from the same few ratings."""
    note = chosen.get("note") or ""
    method = chosen["method"]
    reasons = []
    if method == Method.AIPW:
        if WEIGHTS_VARY in note:
            reasons.append(f"{WEIGHTS_VARY} (fewer ratings count fully)")
        if PREDICTIONS_MISS in note:
            reasons.append("the model predicts the ratings worse than their mean does")
    rho = chosen.get("oof_rho")
    tracks = "" if missing(rho) else f" (out-of-fold r = {number(rho, 2)})"
    if method in (Method.PPI, Method.CROSSPPI, Method.PPI_STRATIFIED):
        reasons.append(f"the predictions track the ratings weakly{tracks} and lambda is estimated from few ratings")
    return " and ".join(reasons) or "the predictions add more variance than they remove"


def width_phrase(chosen: Mapping) -> str:
    """The words after the method: the chosen interval's width against naive's, and, when wider, why
    (``why_wider``); empty for a naive estimate or an unknown width."""
    width = chosen.get("width_vs_naive")
    if chosen["method"] not in MODEL_ASSISTED or missing(width):
        return ""
    text = f", its interval {number(width, 2)}× as wide as the naive one"
    return text + f": wider than naive because {why_wider(chosen)}" if width > 1 else text


# ---------------------------------------------------------------- the sentence


def lead(row: ConclusionRow | Mapping) -> str | None:
    """The words the sentence opens with, the ones the report sets in bold: who is rated higher or lower, or that
    no difference was detected; None when there is no conclusion (the sentence is plain)."""
    get = row.get if isinstance(row, Mapping) else lambda name: getattr(row, name)
    if get("method") is None:
        return None
    if get("direction") is not None:
        if get("design") == OBSERVATIONAL:
            return f"Sessions with {get('treatment')} are rated {get('direction')} than sessions with {get('control')}"
        return f"{get('treatment')} is rated {get('direction')} than {get('control')}"
    return "No detectable difference"


def sentence(row: ConclusionRow, n_comparisons: int, width: str = "", guardrails: str = "") -> str:
    """The plain sentence of ``row`` (its ``sentence`` column): the lead, the effect in stars with its interval
    and on the 0-1 scale, the method and ``width`` (``width_phrase``: its width against naive, and why when
    wider); the Holm caveat or what the test could have detected; ``guardrails`` (``guardrail_clause``: each
    guardrail's verdict); why, in parentheses. With no method: "No conclusion: " and why."""
    if row.method is None:
        return f"No conclusion: {row.why}."
    span = (
        f"{in_stars(row.effect)} stars (95 % interval {in_stars(row.ci_low)} to {in_stars(row.ci_high)}; "
        f"{number(row.effect, 3, True)} on the 0–1 scale)"
    )
    name = method_label(row.method)
    if row.direction is not None:
        text = f"{lead(row)}: {span}, by {name}{width}"
        if row.p_holm_caveat is not None:
            text += (
                f"; after Holm's correction for the {n_comparisons} comparisons of this report it is not significant"
                f" (adjusted p = {row.p_holm_caveat:.3f})"
            )
    else:
        arms = (
            f"sessions with {row.treatment} and sessions with {row.control}"
            if row.design == OBSERVATIONAL
            else f"{row.treatment} and {row.control}"
        )
        text = f"{lead(row)} between {arms}: {span} by {name}{width}"
        if row.mde is not None:
            text += (
                f"; the test could have detected {in_stars(row.mde, False)} stars or more"
                f" ({number(row.mde, 3)} on the 0–1 scale, 80 % power)"
            )
    if row.design == OBSERVATIONAL:
        text += ASSOCIATIONAL.format(treatment=row.treatment)
    return f"{text}{guardrails}. ({row.why}.)"


# ---------------------------------------------------------------- the rows


def comparison_count(effects: Sequence[Mapping]) -> int:
    """How many treatment-vs-control comparisons ``effects`` holds (single-arm experiments are none)."""
    return len({(r["experiment"], r["treatment"]) for r in effects if r["treatment"] is not None})


def conclusion_row(
    rows: Sequence[Mapping],
    power: Mapping | None,
    n_comparisons: int,
    guardrails: Sequence[Mapping] = (),
    history: Sequence[Mapping] = (),
) -> ConclusionRow:
    """The conclusion of one comparison from its ``estimates.experiment_effects`` rows (``rows``: every method of
    one experiment and treatment), its ``estimates.power`` row (None: unknown) and the run's number of
    comparisons (for Holm's caveat); its decision (``decide``) from its ``estimates.guardrails`` rows
    (``guardrails``) and its ``estimates.effect_history`` rows (``history``: the confidence sequence)."""
    first = rows[0]
    experiment, treatment, control = first["experiment"], first["treatment"], first["control"]
    design = first.get("design") or RANDOMIZED
    notes = "; ".join(sorted({r["note"] for r in rows if r["note"]}))
    if treatment is None:
        row = ConclusionRow(
            experiment=experiment,
            treatment=None,
            control=control,
            method=None,
            why=NOTHING_TO_COMPARE,
            verdict="not compared",
            sentence=f"{first['note'] or NOTHING_TO_COMPARE}.",
            design=design,
        )
        return with_decision(row, decide(row))
    found = verdict(rows, n_comparisons)
    chosen = found.chosen
    if chosen is None:
        why = f"{found.why} ({notes})" if notes else found.why
        row = ConclusionRow(
            experiment=experiment,
            treatment=treatment,
            control=control,
            method=None,
            why=why,
            verdict=found.short,
            sentence="",
            design=design,
        )
    else:
        method = Method(chosen["method"])
        row = ConclusionRow(
            experiment=experiment,
            treatment=treatment,
            control=control,
            method=method,
            why=found.why,
            effect=chosen["effect"],
            ci_low=chosen["ci_low"],
            ci_high=chosen["ci_high"],
            width_vs_naive=chosen["width_vs_naive"],
            direction=found.direction,
            p_holm_caveat=found.holm_p,
            mde=detectable(method, power) if found.direction is None else None,
            verdict=found.short + (" (associational)" if design == OBSERVATIONAL and found.direction else ""),
            sentence="",
            design=design,
        )
    width = "" if chosen is None else width_phrase(chosen)
    row = replace(row, sentence=sentence(row, n_comparisons, width, guardrail_clause(guardrails)))
    return with_decision(row, decide(row, guardrails, last_look(history, row)))


def with_decision(row: ConclusionRow, decision: Decision) -> ConclusionRow:
    """``row`` with the columns of ``decision``."""
    return replace(
        row,
        decision=decision.decision,
        decision_why=decision.why,
        guardrails_passed=decision.passed,
        guardrails_failed=decision.failed,
        guardrails_inconclusive=decision.inconclusive,
    )


def conclusion_rows(
    effects: Sequence[Mapping],
    power: Sequence[Mapping] = (),
    guardrails: Sequence[Mapping] = (),
    history: Sequence[Mapping] = (),
) -> list[ConclusionRow]:
    """Rows of ``estimates.conclusions``: one per comparison of ``effects`` (``estimates.experiment_effects`` rows
    as mappings), in the order they first appear, and one per single-arm experiment. ``power``: the
    ``estimates.power`` rows (the minimum detectable effect a sentence without a difference gives);
    ``guardrails``: the ``estimates.guardrails`` rows (none: every comparison decides on its primary outcome
    alone, and says so); ``history``: the ``estimates.effect_history`` rows (the confidence sequence a decision
    reports beside it)."""
    groups: dict[tuple[str, str | None], list[Mapping]] = {}
    for r in effects:
        groups.setdefault((r["experiment"], r["treatment"]), []).append(r)
    powers = {(p["experiment"], p["treatment"]): p for p in power}
    guards: dict[tuple[str, str | None, str], list[Mapping]] = {}
    for g in guardrails:
        guards.setdefault((g["experiment"], g["treatment"], g["control"]), []).append(g)
    looks: dict[tuple[str, str | None], list[Mapping]] = {}
    for h in history:
        looks.setdefault((h["experiment"], h["treatment"]), []).append(h)
    n_comparisons = comparison_count(effects)
    return [
        conclusion_row(rows, powers.get(k), n_comparisons, guards.get((*k, rows[0]["control"]), ()), looks.get(k, ()))
        for k, rows in groups.items()
    ]
