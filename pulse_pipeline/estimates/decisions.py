"""The decision for one comparison: ship, hold, keep collecting, or no decision, by the rule of docs/decisions.md,
and the guardrails in its words.

The decision (``decide``, the rule of docs/decisions.md, fixed before the data): what to do with the change,
read from the primary outcome as the verdict reads it and from the comparison's guardrails (``estimates.guardrails``,
one verdict per guardrail: pass, fail, inconclusive, or not estimable). Ship only when the primary is positive (its
interval above zero, kept by Holm) and no guardrail fails (an inconclusive one is named as a caveat); hold when a
guardrail fails (naming it) or the primary is clearly negative (below zero, kept by Holm); keep collecting
otherwise; no decision for a single-arm experiment, a comparison with no valid estimate, and any observational
comparison (an association is not an effect). It reads the fixed-horizon intervals, the ones the sentence beside
it states; a ship or a hold on the primary says whether the always-valid confidence sequence at the last look
(``estimates.effect_history``) agrees, for a team that has looked before.

The guardrails are written as the report writes them: a relative effect and margin in % (``in_percent``), an
absolute one in the metric's units (``guardrail_writer``), each effect with its two-sided 1 - alpha interval
(``interval_level``) against the harm the margin tolerates (``tolerated``). ``estimates.conclusions`` calls
``decide`` for each of its rows and writes the result beside the conclusion.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from .. import tables
from ..stats.guardrails import VERDICTS
from .experiments import OBSERVATIONAL
from .wording import HIGHER, NOTHING_TO_COMPARE, in_stars, missing, number

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


class Primary(Protocol):
    """What the decision reads of a comparison's conclusion (``conclusions.ConclusionRow``): its arms, the method it
    is read by (None: no valid estimate) and why, its design, and the chosen estimate with its direction and
    Holm's caveat."""

    experiment: str
    treatment: str | None
    control: str
    method: str | None
    why: str
    design: str
    effect: float | None
    ci_low: float | None
    ci_high: float | None
    direction: str | None
    p_holm_caveat: float | None


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


@dataclass(frozen=True)
class GuardrailWords:
    """One guardrail row's name and numbers as the decision writes them: what ``guardrail_phrase`` and ``caveat``
    share. ``effect``, ``low``, ``high`` and ``tolerated`` are written on the scale its margin is stated in
    (``guardrail_writer``); ``estimable`` is False when it has no verdict or no effect, and ``note`` then says why
    (' (its note)', or empty)."""

    name: str
    estimable: bool
    note: str
    effect: str
    low: str
    high: str
    tolerated: str
    level: str


def guardrail_writer(scale: str) -> Callable[[float | None], str]:
    """How a guardrail's numbers on ``scale`` (``guardrail_numbers``) are written: a relative one in % with one
    decimal (``in_percent``), an absolute one in the metric's units, signed, 3 decimals."""
    return in_percent if scale == "relative" else (lambda v: number(v, 3, True))


def guardrail_words(g: Mapping) -> GuardrailWords:
    """The name ('cost (llm_cost_usd)', or the guardrail alone without a metric) and the written numbers of a row of
    ``estimates.guardrails`` (``GuardrailWords``)."""
    name = f"{g['guardrail']} ({g['metric']})" if g.get("metric") else str(g["guardrail"])
    effect, low, high, scale = guardrail_numbers(g)
    write = guardrail_writer(scale)
    note = g.get("note")
    return GuardrailWords(
        name=name,
        estimable=g.get("verdict") is not None and not missing(effect),
        note=f" ({note})" if note else "",
        effect=write(effect),
        low=write(low),
        high=write(high),
        tolerated=write(tolerated(g)),
        level=interval_level(g),
    )


def guardrail_phrase(g: Mapping) -> str:
    """One guardrail (a row of ``estimates.guardrails``) in words: its name and metric, its verdict, its effect
    with its two-sided 1 - alpha interval and the harm its margin tolerates ('cost (llm_cost_usd) fails: +40.0 %
    (95 % interval +35.0 % to +45.0 %) against a tolerated +10.0 %'); when not estimable, its note."""
    w = guardrail_words(g)
    if not w.estimable:
        return f"{w.name} is not estimable{w.note}"
    verdict = g.get("verdict")
    return (
        f"{w.name} {VERBS.get(verdict, verdict)}: {w.effect} ({w.level} interval {w.low} to {w.high}) against a"
        f" tolerated {w.tolerated}"
    )


def caveat(g: Mapping) -> str:
    """An inconclusive or not estimable guardrail as the caveat of a ship (it does not block one: only evidence of
    harm does): 'cost (llm_cost_usd) is not yet shown within its tolerated +10.0 % (+6.0 %, 95 % interval +1.0 %
    to +11.0 %)', or that it could not be estimated, and why."""
    w = guardrail_words(g)
    if not w.estimable:
        return f"{w.name} could not be estimated{w.note}"
    return (
        f"{w.name} is not yet shown within its tolerated {w.tolerated} ({w.effect}, {w.level} interval {w.low} to"
        f" {w.high})"
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


def primary_state(row: Primary) -> str:
    """The primary outcome as the decision reads it: POSITIVE (the chosen 95 % interval lies above zero and Holm's
    correction keeps it), NEGATIVE (below zero, kept), UNSETTLED otherwise."""
    if row.direction is None or row.p_holm_caveat is not None:
        return UNSETTLED
    return POSITIVE if row.direction == HIGHER else NEGATIVE


def primary_phrase(row: Primary) -> str:
    """The primary outcome in the decision's words: who is rated higher or lower, with the interval in stars."""
    span = f"{in_stars(row.effect)} stars, 95 % interval {in_stars(row.ci_low)} to {in_stars(row.ci_high)}"
    if row.direction is None:
        return f"no difference between {row.treatment} and {row.control} is detected yet ({span})"
    text = f"{row.treatment} is rated {row.direction} than {row.control} ({span})"
    if row.p_holm_caveat is not None:
        text += f" but not after Holm's correction (adjusted p = {row.p_holm_caveat:.3f})"
    return text


def last_look(history: Sequence[Mapping], row: Primary) -> Mapping | None:
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


def decide(row: Primary, guardrails: Sequence[Mapping] = (), look: Mapping | None = None) -> Decision:
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
