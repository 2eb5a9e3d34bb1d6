"""The session-level statistical model behind the synthetic corpus (one row per session, numpy, vectorized).

Why a generator at all: PULSE estimates arm effects on user happiness from ~5 % self-selected star ratings.
Such an estimator can only be checked against data whose truth is known, so this model draws sessions whose
population arm means are known (``true_arm_means``) while reproducing what makes the real problem hard:

- arm effects act partly *through recorded features* (a worse backbone does worse work, so it fails more
  tests, pushes less and finishes less) and partly *directly* (a shift of the user's satisfaction that no
  recorded feature sees), so a model of the label from features alone cannot recover the whole effect;
- users rate by self-selection: ``P(rated)`` rises with the number of user messages (the paper's rank-biserial
  0.32), and chattier sessions are rated a little lower, so the mean of the rated sessions is biased.

The causal chain for session ``i`` of user ``u`` in arm ``a`` with task type ``t`` (every coefficient lives in
``GeneratorParams``)::

    w_i      = work_a + difficulty_t + N(0, work_noise_sd)                  work quality: every feature sees it
    q_i      = w_i + direct_a * h_u + generosity_u + b_u + N(0, quality_noise_sd)  latent quality (stars)
    M_i      = 1 + NegBin(mean = messages_base * chattiness_u * exp(-messages_work * w_i))     user messages
    S_i      = 1 + Binomial(M_i - 1, segment_prob)                                             work segments
    features = counts whose rates depend on w_i, the task, and the arm's feature shifts (logit/log-rate)
    s_i      = tanh(sentiment_intercept + sentiment_work*w_i + sentiment_failures*failed_i/S_i + noise)  tone
    m_i      = rating_intercept + q_i + b_push*min(push,2) + b_commit*min(commit,3) + b_fail*log1p(failed)
               + b_sent*s_i + b_finish*finished + b_msg*(log M_i - log 10)                 rating location
    stars    = 1 + #{cuts c : m_i + N(0, rating_noise_sd) > c}       per rated segment (ordinal cut, 1..5)

where h_u = chattiness_u^k / E[chattiness^k] with k = ``direct_chattiness`` (default 0: h_u = 1; k > 0: an
arm's direct effect falls harder on chattier users, who also rate more), so
``true_mean_rating_i = E[stars | session] = 1 + sum_c Phi((m_i - c) / rating_noise_sd)`` exactly, and the
session ``label`` is the mean of its (1..3, mostly 1-2) segment stars. ``direct_a`` and ``generosity_u`` move
the rating and nothing recorded: that is the part of an arm effect no feature sees. Who rates::

    random:        p_i = rated_fraction
    self_selected: p_i = expit(a + selection_log_messages * log M_i),  a solved so E[p] = rated_fraction

(``a`` is solved on a fixed-seed reference draw of the population, so ``p_rated`` is a fixed function of M_i,
not of the sample at hand: ratings are missing at random given the recorded user-message count).

Two options, both off by default (defaults draw exactly what they drew before), make users, not sessions, the
unit of an experiment: ``user_assignment`` gives each user one arm per experiment (sticky assignment: a user's
sessions in an experiment all get that arm; which experiment a session belongs to is still drawn per session),
and ``user_effect_sd`` adds a persistent user intercept b_u ~ N(0, user_effect_sd) to q (stars), on top of
``generosity_u``: the taste one user carries into every session, which no feature records. Each draws from its
own random stream, so turning one on leaves every other quantity of the draw unchanged.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from functools import lru_cache

import numpy as np

from ..stars import stars_to_label

EXPERIMENTS: dict[str, tuple[str, ...]] = {
    "llm-backbone": ("claude-4-sonnet", "gpt-5"),
    "planning": ("no-plan", "show-plan"),
    "condenser": ("max-step-120", "max-step-80", "max-step-60"),
}
"""Each experiment's arms; the first arm listed is the control."""

CONTROLS: dict[str, str] = {name: arms[0] for name, arms in EXPERIMENTS.items()}

TASK_TYPES: tuple[str, ...] = (
    "Fix Bugs",
    "Implement Features",
    "Create Programs from Scratch",
    "Fix Failing Continuous Integration",
    "Fix Merge Conflicts",
    "Write Documentation",
    "Perform Deployments",
    "Perform Data Analysis",
)
"""The paper's eight task types, in a fixed order (the per-task tuples of ``GeneratorParams`` follow it)."""

FEEDBACK_REASONS: tuple[str, ...] = (
    "misunderstood instruction",
    "forgot context",
    "unnecessary changes",
    "should've asked first",
    "didn't finish the job",
    "other",
)

SCENARIOS: tuple[str, ...] = ("self_selected", "random")

LANGUAGES: tuple[str, ...] = ("en", "es", "de", "zh", "pt", "fr")


@dataclass(frozen=True)
class ArmEffect:
    """What one arm changes, relative to the experiment's control (all zeros).

    ``direct`` shifts q but not w: the user's satisfaction moves and no recorded feature sees it.
    ``work`` shifts work quality w (stars), which every feature sees. The rest act on single features:
    ``test_fail_logit`` adds to the logit of a test run failing, ``other_fail_log`` / ``push_log`` /
    ``commit_log`` multiply the rates of failing non-test commands / pushes / commits by ``exp(.)``,
    ``finish_logit`` adds to the logit of ending in ``finish``.
    """

    direct: float = 0.0
    work: float = 0.0
    test_fail_logit: float = 0.0
    other_fail_log: float = 0.0
    push_log: float = 0.0
    commit_log: float = 0.0
    finish_logit: float = 0.0


_DEFAULT_ARM_EFFECTS: tuple[tuple[str, ArmEffect], ...] = (
    ("claude-4-sonnet", ArmEffect()),
    # the weaker backbone: worse work (more failures, fewer pushes and finishes) and a direct hit besides
    ("gpt-5", ArmEffect(direct=-0.15, work=-0.14, test_fail_logit=0.2, push_log=-0.15, finish_logit=-0.2)),
    ("no-plan", ArmEffect()),
    # showing the plan first: users feel in control (direct) and the agent takes fewer wrong turns
    ("show-plan", ArmEffect(direct=0.085, work=0.06, finish_logit=0.1)),
    ("max-step-120", ArmEffect()),
    # condensing history sooner: ~nothing at 80 steps, a small loss of context at 60
    ("max-step-80", ArmEffect()),
    ("max-step-60", ArmEffect(direct=-0.05, work=-0.035, other_fail_log=0.1)),
)


_OPTIONS_OFF: dict[str, object] = {"user_effect_sd": 0.0, "user_assignment": False}
"""Options added after corpora were published, with their off values (``GeneratorParams.as_dict`` omits them)."""


@dataclass(frozen=True)
class GeneratorParams:
    """Every coefficient of the generator, in one place (tuples, not dicts, so the params are hashable).

    Units: w, q and the rating location m are in stars; ``*_log`` multiply a rate by exp(.), ``*_logit`` add
    to a logit; per-task tuples follow ``TASK_TYPES``. Defaults give, over all sessions: median user messages
    10, mean label ~4.12 stars (~4.01 among rated sessions; the paper: 4.07), 5 % rated with a rank-biserial of
    user messages rated vs unrated ~0.33 (the paper: 0.32), true effects (normalized) gpt-5 vs
    claude-4-sonnet ~-0.07 (-0.28 stars), show-plan ~+0.03, max-step-80 0, max-step-60 ~-0.02; about
    40 % of gpt-5's effect is direct (unseen by any feature), the rest goes through features.
    """

    # --- population -------------------------------------------------------------------------------------
    users_per_session: float = 15000 / 36000  # n_users = round(n_sessions * this) (the paper: 15k users, 36k)
    user_activity_sigma: float = 1.0  # lognormal sd of how many sessions a user opens (beyond their first)
    chattiness_sigma: float = 0.45  # lognormal sd of a user's chattiness (median 1); drives user messages
    generosity_sd: float = 0.35  # sd of a user's baseline generosity (stars, added to q, not to w)
    direct_chattiness: float = 0.0  # elasticity k of an arm's direct effect in the user's chattiness (see _draw)
    non_english_share: float = 0.08  # share of users writing in a language other than English
    user_effect_sd: float = 0.0  # sd of a persistent user intercept b_u on q (stars); 0: none (see module docstring)
    # --- assignment ---------------------------------------------------------------------------------------
    user_assignment: bool = False  # True: each user gets one arm per experiment (sticky), not each session
    experiment_weights: tuple[float, ...] = (1.0, 1.0, 1.0)  # relative, in EXPERIMENTS order
    arm_weights: tuple[tuple[float, ...], ...] = ((1.0, 1.0), (1.0, 1.0), (1.0, 1.0, 1.0))  # within experiment
    arm_effects: tuple[tuple[str, ArmEffect], ...] = _DEFAULT_ARM_EFFECTS
    # --- tasks (in TASK_TYPES order) -------------------------------------------------------------------------
    task_probs: tuple[float, ...] = (0.30, 0.24, 0.12, 0.08, 0.05, 0.08, 0.05, 0.08)
    task_difficulty: tuple[float, ...] = (-0.05, -0.05, 0.10, -0.20, -0.05, 0.25, -0.20, 0.10)  # on w
    task_test_rate: tuple[float, ...] = (0.9, 0.7, 0.6, 1.1, 0.5, 0.1, 0.3, 0.3)  # test runs per segment
    task_edit_rate: tuple[float, ...] = (1.2, 1.6, 2.0, 1.0, 1.2, 1.5, 0.6, 0.8)  # file edits per segment
    task_git_rate: tuple[float, ...] = (1.0, 1.0, 0.8, 1.2, 1.5, 0.8, 1.3, 0.4)  # multiplies commit/push rates
    task_rebase_rate: tuple[float, ...] = (0.03, 0.03, 0.0, 0.1, 0.9, 0.01, 0.05, 0.0)  # rebases per session
    # --- latent quality ------------------------------------------------------------------------------------
    work_noise_sd: float = 0.5  # session-level noise of w (stars)
    quality_noise_sd: float = 0.3  # noise of q beyond w: satisfaction no feature sees (stars)
    # --- user messages and segments ---------------------------------------------------------------------
    messages_base: float = 10.5  # mean of M - 1 for a median-chattiness user at w = 0
    messages_work: float = 0.3  # M - 1 scales with exp(-this * w): bad work needs more corrections
    messages_dispersion: float = 3.0  # negative-binomial shape of M - 1 (Poisson as this -> inf)
    segment_prob: float = 0.5  # each user message after the first opens a new segment with this probability
    # --- features (rates at w = 0; *_work: change per star of w) -----------------------------------------
    test_fail_intercept: float = -1.1  # logit of one test run failing
    test_fail_work: float = -1.0
    other_fail_rate: float = 0.3  # failing non-test commands per segment
    other_fail_work: float = -0.5  # on the log rate
    commit_rate: float = 0.45  # commits per sqrt(segment) (times task_git_rate)
    commit_work: float = 0.5  # on the log rate
    push_rate: float = 0.55  # pushes per session (times task_git_rate)
    push_work: float = 0.8  # on the log rate
    pull_rate: float = 0.15  # pulls per session
    reset_rate: float = 0.06  # hard resets per session
    reset_work: float = -0.8  # on the log rate
    read_rate: float = 0.6  # file reads per segment (rendered only)
    other_cmd_rate: float = 0.6  # succeeding non-test, non-git commands per segment (rendered only)
    finish_intercept: float = 0.5  # logit of ending in ``finish``
    finish_work: float = 1.2
    # --- user tone ---------------------------------------------------------------------------------------
    sentiment_intercept: float = 0.25
    sentiment_work: float = 0.8  # per star of w
    sentiment_failures: float = -0.35  # per failed command per segment
    sentiment_noise_sd: float = 0.3
    # how strongly the user's words follow the tone: a follow-up's mood is words_tone * s + N(0, 1), cut into
    # levels -2..2 (render._user_text). Set so the issue-13 text baselines reach about what they reach on real
    # rated dialogues (~1 000 labels: ridge on TF-IDF r ~0.25, forest on VADER statistics ~0.25; bench/text_signal.py)
    words_tone: float = 0.8
    # --- star ratings ------------------------------------------------------------------------------------
    rating_intercept: float = 4.25  # rating location m at q = 0, no features
    rating_push: float = 0.12  # per push, up to 2
    rating_commit: float = 0.04  # per commit, up to 3
    rating_failures: float = -0.1  # per log1p(failed commands)
    rating_sentiment: float = 0.35  # per unit of sentiment_score
    rating_finish: float = 0.2  # when the session ends in ``finish``
    rating_log_messages: float = -0.1  # per log(user messages / 10): chattier users are a bit less satisfied
    rating_noise_sd: float = 0.75  # per-segment noise around m
    rating_cuts: tuple[float, ...] = (1.5, 2.5, 3.5, 4.5)  # stars = 1 + #{cuts below m + noise}
    # --- who rates, and how many segments ----------------------------------------------------------------
    selection_log_messages: float = 0.8  # self_selected: slope of logit P(rated) on log(user messages)
    extra_rated_segments_rate: float = 0.45  # a rated session rates 1 + Poisson(this) segments ...
    max_rated_segments: int = 3  # ... at most this many, and at most its n_segments
    # --- fixed-seed reference draws ------------------------------------------------------------------------
    reference_sessions: int = 200_000  # draw used to solve the self-selection intercept
    truth_sessions: int = 400_000  # Monte Carlo draw per arm for the true arm means
    reference_seed: int = 20_250_601

    def arm_effect(self, variant: str) -> ArmEffect:
        """The ``ArmEffect`` of a variant (KeyError for a variant without one)."""
        for name, effect in self.arm_effects:
            if name == variant:
                return effect
        raise KeyError(f"no arm effect for variant {variant!r}")

    def as_dict(self) -> dict[str, object]:
        """JSON-ready view (arm effects as a dict of dicts) for the truth sidecar.

        The user-unit options (``user_effect_sd``, ``user_assignment``) appear only when turned on, so a corpus
        drawn with the defaults has the same sidecar, byte for byte, as before the options existed.
        """
        out: dict[str, object] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name in _OPTIONS_OFF and value == _OPTIONS_OFF[f.name]:
                continue
            if f.name == "arm_effects":
                value = {name: {g.name: getattr(e, g.name) for g in fields(e)} for name, e in value}
            elif isinstance(value, tuple):
                value = [list(v) if isinstance(v, tuple) else v for v in value]
            out[f.name] = value
        return out


ALL_ARMS: tuple[tuple[str, str], ...] = tuple((e, v) for e, arms in EXPERIMENTS.items() for v in arms)
"""(experiment, variant) for every arm, in a fixed order: the arm code of a session indexes this."""


@dataclass(frozen=True)
class SessionTable:
    """One entry per session (1-D arrays, except ``segment_ratings`` which is (n, max_rated_segments)).

    ``failed_commands`` counts every rendered ``run`` observation with a non-zero exit code, so it includes
    the ``test_failures`` (test runs with exit code 1). ``label`` is the realized mean of the
    ``n_label_segments`` stars in ``segment_ratings`` (0-padded), drawn for every session, rated or not;
    ``n_rated_segments`` is ``n_label_segments`` when rated, else 0.
    """

    session_id: np.ndarray  # str
    user_id: np.ndarray  # str
    experiment: np.ndarray  # str
    variant: np.ndarray  # str
    task_type: np.ndarray  # str
    language: np.ndarray  # str, the user's language code
    user_messages: np.ndarray  # int
    n_segments: np.ndarray  # int, 1..user_messages
    git_commit: np.ndarray
    git_push: np.ndarray
    git_pull: np.ndarray
    git_reset: np.ndarray
    git_rebase: np.ndarray
    test_runs: np.ndarray
    test_failures: np.ndarray
    failed_commands: np.ndarray  # includes test_failures
    file_edits: np.ndarray
    finished: np.ndarray  # bool
    sentiment_score: np.ndarray  # float in [-1, 1]
    quality: np.ndarray  # latent q (stars), not observable
    work_quality: np.ndarray  # latent w (stars), the part of q the features see
    true_mean_rating: np.ndarray  # E[stars | session], continuous in [1, 5]
    label: np.ndarray  # realized mean stars of the session's label segments
    segment_ratings: np.ndarray  # (n, max_rated_segments) int, 0 past n_label_segments
    n_label_segments: np.ndarray  # int >= 1: segments a rater rates (would rate)
    rated: np.ndarray  # bool
    n_rated_segments: np.ndarray  # int: n_label_segments if rated else 0
    p_rated: np.ndarray  # true rating probability

    def __len__(self) -> int:
        return int(self.session_id.shape[0])

    def columns(self) -> dict[str, np.ndarray]:
        """The 1-D columns by name (``segment_ratings`` left out), e.g. for ``polars.DataFrame(...)``."""
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name != "segment_ratings"}


# --------------------------------------------------------------------------------------------------------
# small numeric helpers


def expit(x: np.ndarray) -> np.ndarray:
    """Logistic function 1 / (1 + exp(-x))."""
    return 1.0 / (1.0 + np.exp(-x))


def _erf(x: np.ndarray) -> np.ndarray:
    """erf by Abramowitz & Stegun 7.1.26 (abs. error < 1.5e-7): numpy has no erf and scipy is no dependency."""
    sign = np.sign(x)
    a = np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * a)
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))))
    return sign * (1.0 - poly * np.exp(-a * a))


def norm_cdf(x: np.ndarray) -> np.ndarray:
    """Standard normal CDF, Phi(x) = (1 + erf(x / sqrt 2)) / 2."""
    return 0.5 * (1.0 + _erf(np.asarray(x, dtype=np.float64) / math.sqrt(2.0)))


def default_n_users(n_sessions: int, params: GeneratorParams | None = None) -> int:
    """round(n_sessions * users_per_session), at least 1: 15 000 users for the paper's 36 000 sessions."""
    p = params or GeneratorParams()
    return max(1, round(n_sessions * p.users_per_session))


# --------------------------------------------------------------------------------------------------------
# the core draw

# spawned children are fixed by their index: streams added at the end leave the earlier ones' draws unchanged
_STREAMS = (
    "users",
    "assign",
    "task",
    "quality",
    "messages",
    "features",
    "sentiment",
    "ratings",
    "rate",
    "work",
    "user_assign",
    "user_effect",
)


def _arm_tables(params: GeneratorParams) -> dict[str, np.ndarray]:
    effects = [params.arm_effect(v) for _, v in ALL_ARMS]
    return {f.name: np.array([getattr(e, f.name) for e in effects]) for f in fields(ArmEffect)}


def _assign(
    params: GeneratorParams,
    n: int,
    rng: np.random.Generator,
    user: np.ndarray | None = None,
    user_rng: np.random.Generator | None = None,
) -> np.ndarray:
    """Arm codes (indexes into ALL_ARMS): experiment by experiment_weights, then arm by arm_weights.

    With ``params.user_assignment`` the arm's uniform draw belongs to the (user, experiment) pair, drawn from
    ``user_rng``: every session of a user in an experiment gets the same arm (``user``: each session's user).
    """
    w = np.array(params.experiment_weights, dtype=np.float64)
    exp_idx = rng.choice(len(EXPERIMENTS), size=n, p=w / w.sum())
    arm = np.empty(n, dtype=np.int64)
    offset = 0
    u = rng.random(n)
    per_user = None
    if params.user_assignment and user is not None and user_rng is not None:
        per_user = user_rng.random((int(user.max()) + 1 if user.size else 0, len(EXPERIMENTS)))
    for k, arms in enumerate(EXPERIMENTS.values()):
        aw = np.array(params.arm_weights[k], dtype=np.float64)
        cum = np.cumsum(aw / aw.sum())
        draw = u if per_user is None else per_user[user, k]
        within = np.minimum(np.searchsorted(cum, draw, side="right"), len(arms) - 1)
        mask = exp_idx == k
        arm[mask] = offset + within[mask]
        offset += len(arms)
    return arm


def _draw(
    params: GeneratorParams, n: int, seed: int, n_users: int, forced: ArmEffect | None = None
) -> dict[str, np.ndarray]:
    """Every session-level quantity except who rates. ``forced`` puts every session under one arm effect
    (the truth's Monte Carlo; arm codes are then meaningless).

    Each block draws from its own child stream of ``SeedSequence(seed)``, so forcing a different arm with the
    same seed keeps users, tasks and noise the same (common random numbers for the true effects).
    """
    children = np.random.SeedSequence(seed).spawn(len(_STREAMS))
    g = dict(zip(_STREAMS, (np.random.default_rng(s) for s in children), strict=True))
    p = params
    # users: everyone opens >= 1 session (when n_users <= n), the rest by lognormal activity
    ru = g["users"]
    chat_u = np.exp(p.chattiness_sigma * ru.standard_normal(n_users))
    gen_u = p.generosity_sd * ru.standard_normal(n_users)
    lang_u = np.where(ru.random(n_users) < p.non_english_share, ru.integers(1, len(LANGUAGES), n_users), 0)
    activity = np.exp(p.user_activity_sigma * ru.standard_normal(n_users))
    if n_users <= n:
        rest = ru.choice(n_users, size=n - n_users, p=activity / activity.sum())
        user = ru.permutation(np.concatenate([np.arange(n_users), rest]))
    else:
        user = ru.choice(n_users, size=n, p=activity / activity.sum())

    if forced is None:
        arm, eff = _assign(p, n, g["assign"], user, g["user_assign"]), _arm_tables(p)
    else:
        arm = np.zeros(n, dtype=np.int64)
        eff = {f.name: np.array([getattr(forced, f.name)]) for f in fields(ArmEffect)}

    tp = np.array(p.task_probs, dtype=np.float64)
    task = g["task"].choice(len(TASK_TYPES), size=n, p=tp / tp.sum())

    w = eff["work"][arm] + np.array(p.task_difficulty)[task] + p.work_noise_sd * g["work"].standard_normal(n)
    # direct_i = direct_a * chat_u**k / E[chat**k]: with k > 0 an arm pleases (or annoys) chattier users more;
    # the population mean of the direct shift stays direct_a (chat is lognormal(0, chattiness_sigma))
    k = p.direct_chattiness
    scale = chat_u[user] ** k / math.exp(0.5 * (k * p.chattiness_sigma) ** 2) if k else 1.0
    q = w + eff["direct"][arm] * scale + gen_u[user] + p.quality_noise_sd * g["quality"].standard_normal(n)
    if p.user_effect_sd:
        q = q + p.user_effect_sd * g["user_effect"].standard_normal(n_users)[user]

    rm = g["messages"]
    mean_extra = p.messages_base * chat_u[user] * np.exp(-p.messages_work * w)
    r = p.messages_dispersion
    user_messages = 1 + rm.negative_binomial(r, r / (r + mean_extra))
    n_segments = 1 + rm.binomial(user_messages - 1, p.segment_prob)

    rf = g["features"]
    seg = n_segments.astype(np.float64)
    git_rate = np.array(p.task_git_rate)[task]
    test_runs = rf.poisson(seg * np.array(p.task_test_rate)[task])
    test_failures = rf.binomial(
        test_runs, expit(p.test_fail_intercept + p.test_fail_work * w + eff["test_fail_logit"][arm])
    )
    other_failed = rf.poisson(seg * p.other_fail_rate * np.exp(p.other_fail_work * w + eff["other_fail_log"][arm]))
    failed_commands = test_failures + other_failed
    file_edits = rf.poisson(seg * np.array(p.task_edit_rate)[task])
    git_commit = rf.poisson(
        np.sqrt(seg) * p.commit_rate * git_rate * np.exp(p.commit_work * w + eff["commit_log"][arm])
    )
    git_push = rf.poisson(p.push_rate * git_rate * np.exp(p.push_work * w + eff["push_log"][arm]))
    git_pull = rf.poisson(np.full(n, p.pull_rate))
    git_reset = rf.poisson(p.reset_rate * np.exp(p.reset_work * w))
    git_rebase = rf.poisson(np.array(p.task_rebase_rate)[task])
    finished = rf.random(n) < expit(p.finish_intercept + p.finish_work * w + eff["finish_logit"][arm])

    sentiment = np.tanh(
        p.sentiment_intercept
        + p.sentiment_work * w
        + p.sentiment_failures * failed_commands / seg
        + p.sentiment_noise_sd * g["sentiment"].standard_normal(n)
    )

    m = (
        p.rating_intercept
        + q
        + p.rating_push * np.minimum(git_push, 2)
        + p.rating_commit * np.minimum(git_commit, 3)
        + p.rating_failures * np.log1p(failed_commands)
        + p.rating_sentiment * sentiment
        + p.rating_finish * finished
        + p.rating_log_messages * (np.log(user_messages) - math.log(10.0))
    )
    cuts = np.array(p.rating_cuts)
    true_mean = 1.0 + norm_cdf((m[:, None] - cuts[None, :]) / p.rating_noise_sd).sum(axis=1)

    rr = g["ratings"]
    k_max = p.max_rated_segments
    n_label = np.minimum(np.minimum(1 + rr.poisson(p.extra_rated_segments_rate, n), k_max), n_segments)
    latent = m[:, None] + p.rating_noise_sd * rr.standard_normal((n, k_max))
    stars = 1 + (latent[:, :, None] > cuts[None, None, :]).sum(axis=2)
    stars = np.where(np.arange(k_max)[None, :] < n_label[:, None], stars, 0).astype(np.int64)
    label = stars.sum(axis=1) / n_label

    return {
        "user": user,
        "arm": arm,
        "task": task,
        "language": lang_u[user],
        "quality": q,
        "work_quality": w,
        "user_messages": user_messages.astype(np.int64),
        "n_segments": n_segments.astype(np.int64),
        "git_commit": git_commit,
        "git_push": git_push,
        "git_pull": git_pull,
        "git_reset": git_reset,
        "git_rebase": git_rebase,
        "test_runs": test_runs,
        "test_failures": test_failures,
        "failed_commands": failed_commands,
        "file_edits": file_edits,
        "finished": finished,
        "sentiment_score": sentiment,
        "true_mean_rating": true_mean,
        "label": label,
        "segment_ratings": stars,
        "n_label_segments": n_label.astype(np.int64),
        "rate_stream": g["rate"],
    }


# --------------------------------------------------------------------------------------------------------
# who rates


@lru_cache(maxsize=32)
def selection_intercept(params: GeneratorParams, rated_fraction: float) -> float:
    """The intercept a of ``logit P(rated) = a + b log M`` with E[P(rated)] = rated_fraction in the population.

    Solved by bisection on a fixed-seed reference draw (``reference_sessions`` sessions), so the rating
    probability is the same function of M for every sample drawn with these params.
    """
    ref = _draw(
        params, params.reference_sessions, params.reference_seed, default_n_users(params.reference_sessions, params)
    )
    values, counts = np.unique(ref["user_messages"], return_counts=True)
    x = params.selection_log_messages * np.log(values)
    w = counts / counts.sum()
    lo, hi = -40.0, 40.0
    for _ in range(100):
        mid = 0.5 * (lo + hi)
        if float(np.dot(w, expit(mid + x))) < rated_fraction:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


def rating_probability(
    user_messages: np.ndarray, scenario: str, rated_fraction: float, params: GeneratorParams | None = None
) -> np.ndarray:
    """P(rated) per session: constant ``rated_fraction`` ("random") or expit(a + b log M) ("self_selected")."""
    p = params or GeneratorParams()
    m = np.asarray(user_messages, dtype=np.float64)
    if scenario == "random":
        return np.full(m.shape, float(rated_fraction))
    if scenario == "self_selected":
        a = selection_intercept(p, float(rated_fraction))
        return expit(a + p.selection_log_messages * np.log(m))
    raise ValueError(f"unknown scenario {scenario!r}; expected one of {SCENARIOS}")


# --------------------------------------------------------------------------------------------------------
# public API


RECORDED_COUNTS: tuple[str, ...] = (
    "user_messages",
    "git_commit",
    "git_push",
    "git_pull",
    "git_reset",
    "git_rebase",
    "test_runs",
    "test_failures",
    "failed_commands",
    "file_edits",
    "finished",
    "sentiment_score",
)
FEATURE_NAMES: tuple[str, ...] = RECORDED_COUNTS + tuple(f"task_type__{t}" for t in TASK_TYPES)
"""The columns of :func:`feature_matrix`: what the pipeline records of a session, without rendering it."""


def feature_matrix(table: SessionTable, mask: np.ndarray | None = None) -> np.ndarray:
    """Float matrix (sessions in ``mask``, or all) x ``FEATURE_NAMES``: the counts, tone and finish flag, and a
    one-hot task type, as ``features.session_features`` would hold them. For benchmarks and the coverage
    validation, which skip rendering and re-ingesting JSON."""
    rows = slice(None) if mask is None else mask
    cols = [np.asarray(getattr(table, c), dtype=np.float64)[rows] for c in RECORDED_COUNTS]
    task = np.asarray(table.task_type)[rows]
    cols += [(task == t).astype(np.float64) for t in TASK_TYPES]
    return np.column_stack(cols)


def _ids(prefix: str, numbers: np.ndarray, width: int) -> np.ndarray:
    return np.array([f"{prefix}{k:0{width}d}" for k in numbers.tolist()])


def simulate_sessions(
    n_sessions: int,
    seed: int = 0,
    n_users: int | None = None,
    scenario: str = "self_selected",
    rated_fraction: float = 0.05,
    *,
    params: GeneratorParams | None = None,
    session_prefix: str = "",
    user_prefix: str = "",
) -> SessionTable:
    """Draw ``n_sessions`` sessions from the model (see the module docstring for every formula).

    Deterministic in (n_sessions, seed, n_users, scenario, rated_fraction, params). Session ids are
    ``<session_prefix>s000001``.. and user ids ``<user_prefix>u000001``.. (zero-padded to at least 6 digits). The
    prefixes default to none, for tables that stay in memory; a corpus written to disk gets prefixes unique to it
    (``corpus.write_corpus``), so that two corpora delivered to one warehouse never share an id.
    """
    if n_sessions < 1:
        raise ValueError("n_sessions must be >= 1")
    if not 0.0 < rated_fraction < 1.0:
        raise ValueError("rated_fraction must be in (0, 1)")
    if scenario not in SCENARIOS:
        raise ValueError(f"unknown scenario {scenario!r}; expected one of {SCENARIOS}")
    p = params or GeneratorParams()
    nu = default_n_users(n_sessions, p) if n_users is None else int(n_users)
    if nu < 1:
        raise ValueError("n_users must be >= 1")
    d = _draw(p, n_sessions, seed, nu)
    p_rated = rating_probability(d["user_messages"], scenario, rated_fraction, p)
    rated = d["rate_stream"].random(n_sessions) < p_rated
    arms = np.array(ALL_ARMS)
    width = max(6, len(str(max(n_sessions, nu))))
    return SessionTable(
        session_id=_ids(f"{session_prefix}s", np.arange(1, n_sessions + 1), width),
        user_id=_ids(f"{user_prefix}u", d["user"] + 1, width),
        experiment=arms[d["arm"], 0],
        variant=arms[d["arm"], 1],
        task_type=np.array(TASK_TYPES)[d["task"]],
        language=np.array(LANGUAGES)[d["language"]],
        user_messages=d["user_messages"],
        n_segments=d["n_segments"],
        git_commit=d["git_commit"],
        git_push=d["git_push"],
        git_pull=d["git_pull"],
        git_reset=d["git_reset"],
        git_rebase=d["git_rebase"],
        test_runs=d["test_runs"],
        test_failures=d["test_failures"],
        failed_commands=d["failed_commands"],
        file_edits=d["file_edits"],
        finished=d["finished"],
        sentiment_score=d["sentiment_score"],
        quality=d["quality"],
        work_quality=d["work_quality"],
        true_mean_rating=d["true_mean_rating"],
        label=d["label"],
        segment_ratings=d["segment_ratings"],
        n_label_segments=d["n_label_segments"],
        rated=rated,
        n_rated_segments=np.where(rated, d["n_label_segments"], 0),
        p_rated=p_rated,
    )


@lru_cache(maxsize=64)
def _mean_stars_under(params: GeneratorParams, effect: ArmEffect) -> float:
    """Population mean of the label under one arm effect: the mean of E[stars | session] over
    ``truth_sessions`` sessions all forced under it (fixed seed; E[label | session] = true_mean_rating)."""
    n = params.truth_sessions
    d = _draw(params, n, params.reference_seed + 1, default_n_users(n, params), forced=effect)
    return float(d["true_mean_rating"].mean())


def _arm_mean_stars(params: GeneratorParams, variant: str) -> float:
    return _mean_stars_under(params, params.arm_effect(variant))


def true_arm_means(
    params: GeneratorParams | None = None, experiment: str = "llm-backbone", *, normalized: bool = False
) -> dict[str, float]:
    """Each arm's population mean of the session label, in stars or normalized (``stars.stars_to_label``).

    Computed by Monte Carlo over ``params.truth_sessions`` sessions per arm with a fixed seed and common random
    numbers across arms (Monte Carlo s.e. of an arm mean ~0.001 stars, of an effect smaller still); cached.
    """
    p = params or GeneratorParams()
    if experiment not in EXPERIMENTS:
        raise KeyError(f"unknown experiment {experiment!r}")
    out = {v: _arm_mean_stars(p, v) for v in EXPERIMENTS[experiment]}
    return {v: float(stars_to_label(x)) for v, x in out.items()} if normalized else out


def true_effects(
    params: GeneratorParams | None = None, experiment: str = "llm-backbone", *, normalized: bool = True
) -> dict[str, float]:
    """Treatment minus control (the first arm in EXPERIMENTS) of the population mean label, per treatment."""
    means = true_arm_means(params, experiment, normalized=normalized)
    control = CONTROLS[experiment]
    return {v: means[v] - means[control] for v in EXPERIMENTS[experiment] if v != control}


def direct_share(params: GeneratorParams | None = None, variant: str = "gpt-5") -> float:
    """Share of an arm's true effect that is direct: the effect with only ``direct`` kept over the full effect.

    (The remainder acts through the recorded features, including tone and the user-message count.)
    """
    p = params or GeneratorParams()
    experiment = next(e for e, v in ALL_ARMS if v == variant)
    control = CONTROLS[experiment]
    full = _arm_mean_stars(p, variant) - _arm_mean_stars(p, control)
    only_direct = ArmEffect(direct=p.arm_effect(variant).direct)
    direct = _mean_stars_under(p, only_direct) - _arm_mean_stars(p, control)
    return direct / full if full != 0 else float("nan")
