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

The decision (``decide``, the rule of docs/decisions.md, fixed before the data): what to do with the change,
read from the primary outcome as the verdict reads it and from the comparison's guardrails (``estimates.guardrails``,
one verdict per guardrail: pass, fail, inconclusive, or not estimable). Ship only when the primary is positive (its
interval above zero, kept by Holm) and no guardrail fails (an inconclusive one is named as a caveat); hold when a
guardrail fails (naming it) or the primary is clearly negative (below zero, kept by Holm); keep collecting
otherwise; no decision for a single-arm experiment, a comparison with no valid estimate, and any observational
comparison (an association is not an effect). It reads the fixed-horizon intervals, the ones the sentence beside
it states; a ship or a hold on the primary says whether the always-valid confidence sequence at the last look
(``estimates.effect_history``) agrees, for a team that has looked before.

Numbers in the sentence are written as the report writes them (``number``, ``in_stars``): effects in stars are
4 x the 0-1 difference (``stars.label_difference_in_stars``), 2 decimals.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from .. import tables
from ..stars import label_difference_in_stars
from ..stats.aipw import PREDICTIONS_MISS, WEIGHTS_VARY
from ..stats.guardrails import VERDICTS
from .experiments import OBSERVATIONAL, RANDOMIZED
from .methods import Method, method_label

HIGHER, LOWER = "higher", "lower"
SIGNIFICANT = 0.05  # Holm's adjusted p below this keeps a difference whose interval excludes zero
NOTHING_TO_COMPARE = "single-arm experiment: nothing to compare"


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


# ---------------------------------------------------------------- numbers as the sentence (and the report) write them


def missing(value: object) -> bool:
    """None or NaN: a statistic that is undefined (too few ratings), stored as NULL."""
    return value is None or (isinstance(value, float) and math.isnan(value))


def number(value: float | None, digits: int = 3, signed: bool = False) -> str:
    """The number as the report shows it: ``digits`` decimals (ASCII '-', so it pastes into a calculator), whole
    with thousands separators from 1 000 up (token counts, durations), '–' when missing."""
    if missing(value):
        return "–"
    if abs(value) >= 1000:
        return f"{value:+,.0f}" if signed else f"{value:,.0f}"
    return f"{value:+.{digits}f}" if signed else f"{value:.{digits}f}"


def in_stars(value: float | None, signed: bool = True) -> str:
    """A difference on the 0-1 label scale in stars (4 x: ``stars.label_difference_in_stars``), 2 decimals."""
    return number(None if missing(value) else label_difference_in_stars(value), 2, signed)


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


# ---------------------------------------------------------------- the decision (docs/decisions.md)


SHIP, HOLD, KEEP_COLLECTING, NO_DECISION = "ship", "hold", "keep collecting", "no decision"
DECISIONS = (SHIP, HOLD, KEEP_COLLECTING, NO_DECISION)
PASS, FAIL, INCONCLUSIVE = VERDICTS
"""A guardrail's verdict as ``estimates.guardrails`` stores it (``stats.guardrails.noninferiority``: pass, the
one-sided upper bound of the harm inside the margin; fail, the lower bound beyond it; inconclusive otherwise; NULL:
not estimable, counted as inconclusive)."""
VERBS = {PASS: "passes", FAIL: "fails", INCONCLUSIVE: "is inconclusive", None: "is not estimable"}
POSITIVE, NEGATIVE, UNSETTLED = "positive", "negative", "unsettled"

NOT_AN_EFFECT = (
    "an association, not an effect: the arms of {experiment} come from a session field, not from randomization,"
    " so neither the ratings nor the guardrails say what {treatment} itself does; assign users (or sessions) to"
    " {treatment} and {control} at random (an assignments file) and the same comparison is decided"
)
"""Why an observational comparison gets no decision, and what would make it one (``decide``)."""


@dataclass(frozen=True)
class Decision:
    """What to do with a comparison's change (``decide``), why, and its guardrails counted by verdict."""

    decision: str  # one of DECISIONS
    why: str  # one sentence
    passed: int = 0
    failed: int = 0
    inconclusive: int = 0  # inconclusive or not estimable


def in_percent(value: float | None, signed: bool = True) -> str:
    """A share (0.1) as a percentage with one decimal ('+10.0 %'), '–' when missing: how a guardrail's relative
    effect and margin are written, in the decision and in the report."""
    if missing(value):
        return "–"
    return f"{100 * value:+.1f} %" if signed else f"{100 * value:.1f} %"


def tolerated(g: Mapping) -> float | None:
    """The guardrail's margin as the signed bound of the harm it tolerates, on the scale of its effect: the
    metric may rise by up to ``margin`` when lower is better (+margin), fall by up to it when higher is better
    (-margin). Relative margins are shares of the control mean, absolute ones metric units."""
    margin = g.get("margin")
    if missing(margin):
        return None
    return -abs(margin) if g.get("direction") == "higher" else abs(margin)


def guardrail_numbers(g: Mapping) -> tuple[float | None, float | None, float | None, str]:
    """A guardrail row's effect, interval and margin bound on the scale its margin is stated in, with how to write
    them: relative (shares of the control mean, in %) or absolute (the metric's units)."""
    if g.get("margin_type") == "absolute":
        return g.get("effect"), g.get("ci_low"), g.get("ci_high"), "absolute"
    return g.get("relative_effect"), g.get("relative_ci_low"), g.get("relative_ci_high"), "relative"


def interval_level(g: Mapping) -> str:
    """The level of a guardrail's stored two-sided interval, 1 - alpha ('95 %'); 'the' when alpha is unknown."""
    alpha = g.get("alpha")
    return "the" if missing(alpha) else f"{100 * (1 - alpha):g} %"


def guardrail_phrase(g: Mapping) -> str:
    """One guardrail (a row of ``estimates.guardrails``) in words: its name and metric, its verdict, its effect
    with its two-sided 1 - alpha interval and the harm its margin tolerates ('cost (llm_cost_usd) fails: +40.0 %
    (95 % interval +35.0 % to +45.0 %) against a tolerated +10.0 %'); when not estimable, its note."""
    verdict = g.get("verdict")
    name = f"{g['guardrail']} ({g['metric']})" if g.get("metric") else str(g["guardrail"])
    effect, low, high, scale = guardrail_numbers(g)
    if verdict is None or missing(effect):
        note = g.get("note")
        return f"{name} is not estimable" + (f" ({note})" if note else "")
    write = in_percent if scale == "relative" else (lambda v: number(v, 3, True))
    return (
        f"{name} {VERBS.get(verdict, verdict)}: {write(effect)} ({interval_level(g)} interval {write(low)} to"
        f" {write(high)}) against a tolerated {write(tolerated(g))}"
    )


def caveat(g: Mapping) -> str:
    """An inconclusive or not estimable guardrail as the caveat of a ship (it does not block one: only evidence of
    harm does): 'cost (llm_cost_usd) is not yet shown within its tolerated +10.0 % (+6.0 %, 95 % interval +1.0 %
    to +11.0 %)', or that it could not be estimated, and why."""
    name = f"{g['guardrail']} ({g['metric']})" if g.get("metric") else str(g["guardrail"])
    effect, low, high, scale = guardrail_numbers(g)
    if g.get("verdict") is None or missing(effect):
        note = g.get("note")
        return f"{name} could not be estimated" + (f" ({note})" if note else "")
    write = in_percent if scale == "relative" else (lambda v: number(v, 3, True))
    return (
        f"{name} is not yet shown within its tolerated {write(tolerated(g))} ({write(effect)},"
        f" {interval_level(g)} interval {write(low)} to {write(high)})"
    )


def guardrail_clause(guardrails: Sequence[Mapping]) -> str:
    """The words the conclusion's sentence gains when the comparison has guardrails: '; its guardrails: cost
    fails, duration passes'; empty without guardrails."""
    if not guardrails:
        return ""
    said = [f"{g['guardrail']} {VERBS.get(g.get('verdict'), g.get('verdict'))}" for g in guardrails]
    return f"; its guardrail{'s' if len(said) > 1 else ''}: {', '.join(said)}"


def all_pass(n: int) -> str:
    """'1 guardrail passes', 'both guardrails pass', 'all 3 guardrails pass'."""
    return {1: "1 guardrail passes", 2: "both guardrails pass"}.get(n, f"all {n} guardrails pass")


def primary_state(row: ConclusionRow) -> str:
    """The primary outcome as the decision reads it: POSITIVE (the chosen 95 % interval lies above zero and Holm's
    correction keeps it), NEGATIVE (below zero, kept), UNSETTLED otherwise."""
    if row.direction is None or row.p_holm_caveat is not None:
        return UNSETTLED
    return POSITIVE if row.direction == HIGHER else NEGATIVE


def primary_phrase(row: ConclusionRow) -> str:
    """The primary outcome in the decision's words: who is rated higher or lower, with the interval in stars."""
    span = f"{in_stars(row.effect)} stars, 95 % interval {in_stars(row.ci_low)} to {in_stars(row.ci_high)}"
    if row.direction is None:
        return f"no difference between {row.treatment} and {row.control} is detected yet ({span})"
    text = f"{row.treatment} is rated {row.direction} than {row.control} ({span})"
    if row.p_holm_caveat is not None:
        text += f" but not after Holm's correction (adjusted p = {row.p_holm_caveat:.3f})"
    return text


def last_look(history: Sequence[Mapping], row: ConclusionRow) -> Mapping | None:
    """The comparison's ``estimates.effect_history`` row at its last look for the method it is read by (None:
    no such row, or its sequence is undefined)."""
    looks = [
        h
        for h in history
        if (h["experiment"], h["treatment"], h["method"]) == (row.experiment, row.treatment, row.method)
        and h.get("day") is not None
        and not missing(h.get("cs_low"))
        and not missing(h.get("cs_high"))
    ]
    return max(looks, key=lambda h: h["day"]) if looks else None


def sequence_clause(look: Mapping | None, state: str) -> str:
    """What the always-valid confidence sequence at the last look says of a ship or a hold read from the
    fixed-horizon interval (docs/decisions.md): it agrees, or a team that looked before should wait."""
    if look is None:
        return f"; no confidence sequence to check it against ({tables.EFFECT_HISTORY.qualified} has none for it)"
    low, high = look["cs_low"], look["cs_high"]
    day = look["day"].strftime("%Y-%m-%d") if hasattr(look["day"], "strftime") else str(look["day"])
    span = f"{in_stars(low)} to {in_stars(high)} stars"
    if (state == POSITIVE and low > 0) or (state == NEGATIVE and high < 0):
        return f"; the always-valid confidence sequence at the last look ({day}) excludes zero too ({span})"
    return (
        f"; but the always-valid confidence sequence at the last look ({day}) still holds zero ({span}): read once"
        " at a planned size this stands, after earlier looks wait until the sequence excludes zero"
    )


def decide(row: ConclusionRow, guardrails: Sequence[Mapping] = (), look: Mapping | None = None) -> Decision:
    """The decision for one comparison, by the rule of docs/decisions.md, the first that applies:

    1. no decision: a single-arm experiment, no valid estimate, or an observational comparison (an association);
    2. hold: a guardrail fails (each failing one named with its effect and interval against its margin);
    3. hold: the primary outcome is clearly negative (``primary_state``: interval below zero, kept by Holm);
    4. ship: the primary outcome is positive and no guardrail fails (an inconclusive or not estimable one is
       named as a caveat, ``caveat``; none declared: said so);
    5. keep collecting: otherwise (the primary outcome is not settled).

    ``guardrails``: the comparison's rows of ``estimates.guardrails``; ``look``: its ``estimates.effect_history``
    row at the last look for the chosen method (``last_look``), whose confidence sequence a ship or a hold on the
    primary reports beside the fixed-horizon interval it is read from."""
    verdicts = [g.get("verdict") for g in guardrails]
    passed, failed = verdicts.count(PASS), verdicts.count(FAIL)
    counts = dict(passed=passed, failed=failed, inconclusive=len(verdicts) - passed - failed)

    def said(decision: str, why: str) -> Decision:
        """The decision with its why as a sentence: capitalized, unless it opens with an arm's name (as is)."""
        opening = why if str(why).startswith(str(row.treatment)) else f"{why[0].upper()}{why[1:]}"
        return Decision(decision, f"{opening}.", **counts)

    if row.treatment is None:
        return said(NO_DECISION, NOTHING_TO_COMPARE)
    if row.method is None:
        return said(NO_DECISION, f"no valid estimate of the rating difference: {row.why}")
    if row.design == OBSERVATIONAL:
        why = NOT_AN_EFFECT.format(experiment=row.experiment, treatment=row.treatment, control=row.control)
        return said(NO_DECISION, why)
    state = primary_state(row)
    failing = [g for g in guardrails if g.get("verdict") == FAIL]
    if failing:
        return said(
            HOLD,
            f"guardrail {'; '.join(guardrail_phrase(g) for g in failing)}, so the change is held whatever the"
            f" ratings say ({primary_phrase(row)})",
        )
    if state == NEGATIVE:
        return said(
            HOLD,
            f"{primary_phrase(row)}, kept by Holm's correction: shipping would lower satisfaction, and collecting"
            f" on until it turns would be peeking{sequence_clause(look, state)}",
        )
    if state == POSITIVE:
        open_ = [g for g in guardrails if g.get("verdict") != PASS]
        if not guardrails:
            checked = "no guardrail is declared, so the ratings alone decided"
        elif not open_:
            checked = f"{all_pass(passed)} ({', '.join(str(g['guardrail']) for g in guardrails)})"
        else:
            checked = f"no guardrail fails, but {'; '.join(caveat(g) for g in open_)}"
        return said(SHIP, f"{primary_phrase(row)} and {checked}{sequence_clause(look, state)}")
    if not guardrails:
        guards = "no guardrail is declared"
    elif passed == len(guardrails):
        guards = all_pass(passed)
    else:
        guards = f"no guardrail fails ({passed} of {len(guardrails)} pass)"
    return said(KEEP_COLLECTING, f"{primary_phrase(row)}; {guards}")


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
