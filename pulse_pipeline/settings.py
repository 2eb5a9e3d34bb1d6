"""Every ``PULSE_*`` environment setting, read and checked in one place.

Each stage asks for its own section (``ingest_settings()``, ``feature_settings()``, ``llm_settings()``,
``modeling_settings()``, ``estimate_settings()``); no other module reads ``PULSE_*`` variables. Every reader takes
an optional mapping in place of ``os.environ`` so tests can pass settings without touching the process.

| variable | default | what it sets |
|---|---|---|
| PULSE_HOME | ``./data`` | where PULSE keeps its state (``paths.PulseHome``) |
| PULSE_HOOK_URL | ``http://127.0.0.1:8765`` | the rating service `pulse hook` calls (``hook_settings``) |
| PULSE_HOOK_TOKEN_FILE | none: no token | a file whose first line is the bearer token `pulse hook` sends |
| PULSE_HOOK_TIMEOUT | 2 | seconds `pulse hook` waits for the service before giving up quietly |
| PULSE_HOOK_STATE | ``~/.local/state/pulse/hooks`` | where `pulse hook` remembers the asks it showed |
| PULSE_DAGSTER_POSTGRES_URL | none: SQLite files | the Dagster instance's database, ``postgresql+psycopg2://...`` |
| PULSE_LAKE_CATALOG | sqlite | the tables' DuckLake catalog: ``sqlite[:path]``, ``postgres:...``; ``none``: one file |
| PULSE_LAKE_DATA | ``lake/data/`` | the DuckLake's Parquet files: a folder or an ``s3://`` URL |
| PULSE_DUCKDB_MEMORY | 1GB | DuckDB's memory limit; it spills to disk beyond it |
| PULSE_INGEST_WORKERS | one per core for large drops (at most 4) | reader processes per drop |
| PULSE_MAX_RECORD_MB | 64 | a record (a JSON line or document) larger than this is quarantined unread |
| PULSE_MAX_RECORD_VALUES | 4000000 | a record holding more JSON values than this is quarantined unparsed |
| PULSE_ANNOTATOR | heuristic | ``heuristic`` or ``llm`` |
| PULSE_RUBRIC | the paper's rubric | a rubric TOML file |
| PULSE_HUMAN_LABELS | none | human annotations to measure annotator agreement against |
| PULSE_SCORE_FIELDS | none | JSON paths of numeric scores in session metadata, each a ``score_*`` column |
| PULSE_RATING_SCORES | user-feedback, user_feedback, rating, feedback, thumbs | trace tools' rating score names |
| PULSE_SCORE_RANGES | 1:5; ``thumbs=thumbs`` | ``name=LOW:HIGH`` or ``name=thumbs`` per score name, comma-separated |
| PULSE_SCORE_CATEGORIES | none | JSON ``{name: {label: value}}``: a CATEGORICAL score's labels as values on its range |
| PULSE_LLM_* | see ``LLMSettings`` | the LLM annotator and judge |
| PULSE_MODEL_FAMILIES | all eight | families to compare (4 tabular, ``text``, ``sentiment``, ``baseline``, ``stack``) |
| PULSE_MODEL_CHOICE | pearson | how the family is chosen: pearson, mse or mae |
| PULSE_CV_SEEDS | 5 | cross-validation repetitions (seeds 42, 43, ...) |
| PULSE_CV_SEED_ROWS | 10000 | fewer seeds (>= 2) when seeds x rated sessions passes it; 0: always PULSE_CV_SEEDS |
| PULSE_MODEL_REFIT_SHARE | 0.1 | refit models, propensities past this share of changes since a kept fit; 0: always |
| PULSE_MODEL_THREADS | 1 | OpenMP, BLAS and LightGBM threads per model fit (``all``: every usable core) |
| PULSE_SHIFT_AUC | 0.6 | AUC above which rated sessions count as not representative |
| PULSE_WIDTH_TOLERANCE | 0.02 | slack before a PPI interval narrower than theory allows is flagged |
| PULSE_SEGMENT_MIN_RATINGS | 10 | ratings per arm a subgroup needs for an estimate |
| PULSE_TARGET_EFFECT | 0.05 | the effect (0-1 label scale; 0.2 stars) the power table sizes for |
| PULSE_BENCHMARK_MIN_RATINGS | 35 | ratings per arm a task cluster needs in the benchmark correlation |
| PULSE_SERVE_TOKENS | none: no auth, loopback only | a file of bearer tokens, one a line, ``pulse serve`` accepts |
| PULSE_SERVE_RATE_LIMIT | 100 | requests a second each token (or client) may make to ``pulse serve``; 0: no limit |
| PULSE_SERVE_ROLL_RECORDS | 5000 | ``pulse serve`` rolls its journal into a drop file after this many records ... |
| PULSE_SERVE_ROLL_SECONDS | 30 | ... or this many seconds after the oldest record not yet rolled |
| PULSE_LANGFUSE_PUBLIC_KEY | none: no pull | a Langfuse project's public key (`pulse pull langfuse`, the pull sensor) |
| PULSE_LANGFUSE_SECRET_KEY | none: no pull | its secret key (never printed or logged) |
| PULSE_LANGFUSE_HOST | ``https://cloud.langfuse.com`` | the Langfuse the pull asks (self-hosted: its base URL) |
| PULSE_LANGFUSE_PULL_INTERVAL | 300 | seconds between the pull sensor's pulls under `pulse ui` |
| PULSE_LANGFUSE_PULL_OVERLAP | 3600 | seconds each pull asks again before the last one's end (late arrivals) |
| PULSE_ASK_BUDGET | today's asks a day | the ask policy's budget: rating widgets shown per day (``--budget`` wins) |
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar
from urllib.parse import urlsplit, urlunsplit

Env = Mapping[str, str]
V = TypeVar("V")

ANNOTATORS = ("heuristic", "llm")
# built by modeling/families.py; "text" is the ridge on the users' words alone (modeling/text.py)
MODEL_FAMILIES = ("ordinal_logit", "random_forest", "hist_gbm", "lightgbm", "text", "sentiment", "baseline", "stack")
MODEL_CHOICES = ("pearson", "mse", "mae")


class SettingsError(ValueError):
    """A ``PULSE_*`` variable has a value PULSE cannot use; the message names it and what it accepts."""


def _env(environ: Env | None) -> Env:
    return os.environ if environ is None else environ


def _text(env: Env, name: str) -> str | None:
    """The variable's value, stripped; None when unset or blank."""
    value = (env.get(name) or "").strip()
    return value or None


def _parsed(env: Env, name: str, default: V, kind: Callable[[str], V], what: str) -> V:
    raw = _text(env, name)
    if raw is None:
        return default
    try:
        return kind(raw)
    except ValueError:
        raise SettingsError(f"{name}={raw!r} is not {what} (default {default})") from None


def _number(env: Env, name: str, default: float) -> float:
    return _parsed(env, name, default, float, "a number")


def _optional_number(env: Env, name: str) -> float | None:
    return _parsed(env, name, None, float, "a number")


def _integer(env: Env, name: str, default: int) -> int:
    return _parsed(env, name, default, int, "a whole number")


def _path(env: Env, name: str) -> Path | None:
    raw = _text(env, name)
    return Path(raw).expanduser() if raw else None


def home_root(environ: Env | None = None) -> Path:
    """``PULSE_HOME`` (default ``./data``), as an absolute path."""
    return Path(_text(_env(environ), "PULSE_HOME") or "data").expanduser().resolve()


DAGSTER_POSTGRES_URL = "PULSE_DAGSTER_POSTGRES_URL"
POSTGRES_SCHEME = "postgresql+psycopg2"


def redacted_url(url: str) -> str:
    """The URL with its password replaced by ``***``, for messages and logs (a URL is otherwise printed whole)."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=f"{parts.username or ''}:***@{host}"))


def dagster_postgres_url(environ: Env | None = None) -> str | None:
    """PULSE_DAGSTER_POSTGRES_URL: a ``postgresql+psycopg2://user:password@host:5432/database`` URL
    (``?host=/socket/dir`` for a unix socket) of the database that holds the Dagster instance (runs, event log,
    schedules, sensor ticks); None when unset, and the instance stays in SQLite files under PULSE_HOME/dagster.

    Why PostgreSQL: runs on several machines, or a webserver and a daemon on different hosts, must share one run
    history; SQLite files are on one disk and serialize writers. Why the driver in the scheme: dagster-postgres
    drives PostgreSQL with psycopg2 (its retries on concurrent table creation read psycopg2's error codes), and
    SQLAlchemy 2.1 reads a bare ``postgresql://`` as psycopg 3. Dagster reads the variable itself (the instance's
    dagster.yaml names it, ``paths.instance_yaml``), so it is checked here, where a mistake is one sentence that
    never shows the password."""
    url = _text(_env(environ), DAGSTER_POSTGRES_URL)
    if url is None:
        return None
    parts = urlsplit(url)
    if parts.scheme != POSTGRES_SCHEME or not parts.path.strip("/"):
        raise SettingsError(
            f"{DAGSTER_POSTGRES_URL}={redacted_url(url)!r} is not a PostgreSQL URL with a database "
            f"({POSTGRES_SCHEME}://user:password@host:5432/database)"
        )
    return url


LAKE_CATALOG = "PULSE_LAKE_CATALOG"
LAKE_DATA = "PULSE_LAKE_DATA"
LAKE_CATALOG_KINDS = ("sqlite", "postgres")
ONE_FILE = "none"  # PULSE_LAKE_CATALOG=none: the tables in one DuckDB file, as before the lake


@dataclass(frozen=True)
class LakeSettings:
    """Where the DuckLake's catalog and data files live (``lake.py``); ``sqlite`` and a None ``data``: in
    ``PULSE_HOME/lake/``."""

    catalog: str  # "sqlite", "sqlite:<path>" or "postgres:<libpq connection string>"
    data: str | None  # a folder or an s3:// URL


def lake_settings(environ: Env | None = None) -> LakeSettings | None:
    """PULSE_LAKE_CATALOG and PULSE_LAKE_DATA: the DuckLake the tables live in, or None for one DuckDB file.

    Unset, or ``sqlite``: an SQLite catalog and the Parquet files in ``PULSE_HOME/lake/`` (one machine, no server);
    ``sqlite:/path/catalog.sqlite`` names the catalog file; ``postgres:dbname=pulse host=db user=pulse`` (a libpq
    connection string) lets several machines write one lake. The data files go to PULSE_LAKE_DATA, a folder or an
    ``s3://`` URL. ``none``: the tables in one DuckDB file (``connections.py``), the storage before the lake, kept
    as a fallback and to compare against."""
    env = _env(environ)
    catalog = _text(env, LAKE_CATALOG) or "sqlite"
    data = _text(env, LAKE_DATA)
    if catalog == ONE_FILE:
        if data is not None:
            raise SettingsError(f"{LAKE_DATA} is set but {LAKE_CATALOG}={ONE_FILE}: one DuckDB file has no data folder")
        return None
    if catalog.split(":", 1)[0] not in LAKE_CATALOG_KINDS or catalog == "postgres":
        raise SettingsError(
            f"{LAKE_CATALOG}={catalog.split('password', 1)[0]!r}: choose sqlite, sqlite:<path>, "
            f"postgres:<connection string> (e.g. postgres:dbname=pulse host=db user=pulse) or {ONE_FILE}"
        )
    return LakeSettings(catalog=catalog, data=data)


# --- ingest --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class IngestSettings:
    duckdb_memory: str = "1GB"  # DuckDB spills to disk beyond this, so a large drop fits in a small machine
    workers: int | None = None  # reader processes; None: chosen from the drop's size
    max_record_bytes: int = 64 << 20  # PULSE_MAX_RECORD_MB: a larger record is quarantined (ingest/limits.py)
    max_record_values: int = 4_000_000  # PULSE_MAX_RECORD_VALUES: the most JSON values a record may hold


MAX_RECORD_MB = "PULSE_MAX_RECORD_MB"
MAX_RECORD_VALUES = "PULSE_MAX_RECORD_VALUES"


def ingest_settings(environ: Env | None = None) -> IngestSettings:
    env = _env(environ)
    workers = _parsed(env, "PULSE_INGEST_WORKERS", None, int, "a whole number")
    record_mb = _parsed(env, MAX_RECORD_MB, 64.0, float, "a number of MiB")
    record_values = _parsed(env, MAX_RECORD_VALUES, 4_000_000, int, "a whole number")
    if not 0 < record_mb <= 1 << 20:  # NaN and infinity too
        raise SettingsError(f"{MAX_RECORD_MB}={record_mb}: a number of MiB above 0, at most 1048576 (default 64)")
    if record_values < 1:
        raise SettingsError(f"{MAX_RECORD_VALUES}={record_values}: a whole number above 0 (default 4000000)")
    return IngestSettings(
        duckdb_memory=_text(env, "PULSE_DUCKDB_MEMORY") or "1GB",
        workers=None if workers is None else max(1, workers),
        max_record_bytes=int(record_mb * (1 << 20)),
        max_record_values=record_values,
    )


# --- features ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FeatureSettings:
    annotator: str = "heuristic"
    rubric_path: Path | None = None  # None: the paper's rubric shipped with PULSE
    human_labels_path: Path | None = None
    llm_model: str | None = None  # set: the LLM judge runs (and the LLM annotator may be chosen)
    score_fields: tuple[str, ...] = ()  # JSON paths into a session's metadata_json, e.g. ("a.b", "c")


def score_fields(environ: Env | None = None) -> tuple[str, ...]:
    """PULSE_SCORE_FIELDS: comma-separated JSON paths (``a.b`` is ``$.a.b``) of numeric scores a session's
    metadata may carry (a score another system computed, e.g. an evaluator's). Each becomes the column
    ``score_<path>`` of ``features.session_features`` (``features.wide.score_column``); paths are dot-separated
    keys of letters, digits, ``_`` and ``-``, and two paths may not give the same column."""
    raw = _text(_env(environ), "PULSE_SCORE_FIELDS")
    fields = tuple(dict.fromkeys(f.strip() for f in (raw or "").split(",") if f.strip()))
    for f in fields:
        if not all(part and part.replace("_", "").replace("-", "").isalnum() for part in f.split(".")):
            raise SettingsError(f"PULSE_SCORE_FIELDS: {f!r} is not a dot-separated path of keys (e.g. eval.score)")
    columns = [f.replace(".", "_").replace("-", "_").lower() for f in fields]
    if len(set(columns)) != len(columns):
        raise SettingsError(f"PULSE_SCORE_FIELDS={raw!r}: two paths give the same column name")
    return fields


# --- trace tools' scores (ingest/scores.py) ---------------------------------------------------------------------

RATING_SCORE_NAMES = ("user-feedback", "user_feedback", "rating", "feedback", "thumbs")
THUMBS_RANGE = "thumbs"


@dataclass(frozen=True)
class ScoreSettings:
    """Which scores of a trace tool (Langfuse, OpenTelemetry) are users' ratings, and on what scale they are given.

    ``rating_names``: lower-cased score names; ``ranges``: lower-cased name -> ``(low, high)`` or ``"thumbs"``;
    ``categories``: lower-cased name -> {label: value on the name's range}."""

    rating_names: frozenset[str] = frozenset(RATING_SCORE_NAMES)
    ranges: dict[str, tuple[float, float] | str] = field(default_factory=lambda: {"thumbs": THUMBS_RANGE})
    categories: dict[str, dict[str, float]] = field(default_factory=dict)


def score_settings(environ: Env | None = None) -> ScoreSettings:
    """PULSE_RATING_SCORES (comma-separated score names, case ignored), PULSE_SCORE_RANGES (``name=LOW:HIGH`` or
    ``name=thumbs``, comma-separated; added to the default ``thumbs=thumbs``) and PULSE_SCORE_CATEGORIES (a JSON
    object ``{"name": {"label": value}}``)."""
    env = _env(environ)
    raw_names = _text(env, "PULSE_RATING_SCORES")
    names = RATING_SCORE_NAMES if raw_names is None else tuple(n.strip() for n in raw_names.split(",") if n.strip())
    ranges: dict[str, tuple[float, float] | str] = {"thumbs": THUMBS_RANGE}
    for item in (_text(env, "PULSE_SCORE_RANGES") or "").split(","):
        if not item.strip():
            continue
        name, _, spec = item.partition("=")
        low, _, high = spec.partition(":")
        try:
            bounds = (float(low), float(high)) if spec.strip().lower() != THUMBS_RANGE else None
        except ValueError:
            bounds = ()
        if not name.strip() or bounds == () or (bounds and not (math.isfinite(bounds[0]) and bounds[0] < bounds[1])):
            raise SettingsError(
                f"PULSE_SCORE_RANGES: {item.strip()!r} is not name=LOW:HIGH (LOW < HIGH, e.g. rating=1:10) or"
                " name=thumbs"
            )
        ranges[name.strip().lower()] = THUMBS_RANGE if bounds is None else bounds
    categories: dict[str, dict[str, float]] = {}
    raw_categories = _text(env, "PULSE_SCORE_CATEGORIES")
    if raw_categories is not None:
        try:
            parsed = json.loads(raw_categories)
        except ValueError as error:
            raise SettingsError(f"PULSE_SCORE_CATEGORIES is not JSON ({error})") from None
        ok = isinstance(parsed, dict) and all(
            isinstance(m, dict)
            and all(isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) for v in m.values())
            for m in parsed.values()
        )
        if not ok:
            raise SettingsError(
                "PULSE_SCORE_CATEGORIES: expected a JSON object of score name -> {label: number}, e.g."
                ' {"feedback": {"good": 5, "ok": 3, "bad": 1}}'
            )
        categories = {name.strip().lower(): {str(k): float(v) for k, v in m.items()} for name, m in parsed.items()}
    return ScoreSettings(frozenset(n.lower() for n in names), ranges, categories)


def feature_settings(environ: Env | None = None) -> FeatureSettings:
    env = _env(environ)
    annotator = (_text(env, "PULSE_ANNOTATOR") or "heuristic").lower()
    if annotator not in ANNOTATORS:
        raise SettingsError(f"PULSE_ANNOTATOR={annotator!r}: choose one of {', '.join(ANNOTATORS)}")
    return FeatureSettings(
        annotator=annotator,
        rubric_path=_path(env, "PULSE_RUBRIC"),
        human_labels_path=_path(env, "PULSE_HUMAN_LABELS"),
        llm_model=_text(env, "PULSE_LLM_MODEL"),
        score_fields=score_fields(env),
    )


@dataclass(frozen=True)
class LLMSettings:
    """Which model, how hard to push it, and what it may cost.

    ``llm_settings`` reads PULSE_LLM_MODEL (required; a litellm model name such as ``openai/gpt-5-mini``, or
    ``openai/<name>`` for any OpenAI-compatible server), PULSE_LLM_API_BASE, PULSE_LLM_API_KEY,
    PULSE_LLM_CONCURRENCY (8), PULSE_LLM_MAX_RETRIES (4), PULSE_LLM_TIMEOUT (seconds, 60), PULSE_LLM_SPEND_CAP_USD
    (none), PULSE_LLM_TRANSCRIPT_CHARS (40000), PULSE_LLM_INPUT_COST_PER_TOKEN and PULSE_LLM_OUTPUT_COST_PER_TOKEN
    (USD; unset: litellm's price map) and PULSE_LLM_JSON_MODE (auto | true | false: whether to send
    ``response_format``; auto asks litellm whether the model supports it).
    """

    model: str
    api_base: str | None = None
    api_key: str | None = field(default=None, repr=False)  # never printed
    concurrency: int = 8
    max_retries: int = 4  # retries after the first request, for retryable errors only
    timeout_s: float = 60.0
    spend_cap_usd: float | None = None
    transcript_chars: int = 40_000
    input_cost_per_token: float | None = None  # USD; when either price is set, cost = tokens x price
    output_cost_per_token: float | None = None
    backoff_initial_s: float = 1.0  # first retry waits about this (plus up to as much jitter), doubling up to the max
    backoff_max_s: float = 30.0
    json_mode: bool | None = None  # send response_format=json_object; None: when litellm says the model supports it

    @classmethod
    def from_env(cls, environ: Env | None = None) -> LLMSettings:
        return llm_settings(environ)


def llm_settings(environ: Env | None = None) -> LLMSettings:
    env = _env(environ)
    json_mode = (_text(env, "PULSE_LLM_JSON_MODE") or "auto").lower()
    if json_mode not in ("auto", "true", "false", "1", "0", "yes", "no"):
        raise SettingsError(f"PULSE_LLM_JSON_MODE={json_mode!r} must be auto, true or false")
    model = _text(env, "PULSE_LLM_MODEL")
    if not model:
        raise SettingsError("PULSE_LLM_MODEL is not set (a litellm model name, e.g. openai/gpt-5-mini)")
    return LLMSettings(
        model=model,
        api_base=_text(env, "PULSE_LLM_API_BASE"),
        api_key=_text(env, "PULSE_LLM_API_KEY"),
        concurrency=max(1, _integer(env, "PULSE_LLM_CONCURRENCY", 8)),
        max_retries=max(0, _integer(env, "PULSE_LLM_MAX_RETRIES", 4)),
        timeout_s=_number(env, "PULSE_LLM_TIMEOUT", 60.0),
        spend_cap_usd=_optional_number(env, "PULSE_LLM_SPEND_CAP_USD"),
        transcript_chars=max(1000, _integer(env, "PULSE_LLM_TRANSCRIPT_CHARS", 40_000)),
        input_cost_per_token=_optional_number(env, "PULSE_LLM_INPUT_COST_PER_TOKEN"),
        output_cost_per_token=_optional_number(env, "PULSE_LLM_OUTPUT_COST_PER_TOKEN"),
        json_mode=None if json_mode == "auto" else json_mode in ("true", "1", "yes"),
    )


# --- modeling ------------------------------------------------------------------------------------------------


DEFAULT_MODEL_THREADS = 1
"""OpenMP, BLAS and LightGBM threads per model fit unless PULSE_MODEL_THREADS says otherwise (``modeling/threads.py``
applies it; the random forest's threads sleep rather than spin and use every usable core whatever it says).

Why one: OpenMP and OpenBLAS worker threads spin while they wait, so two processes fitting at once with a thread per
core each (the libraries' default) take the cores from each other's working threads. Measured on this project's
2-core machine (``bench/concurrent_fits.py``: every family cross-validated, 5 folds, on 3 012 rated sessions x 20
features; one run, load average 1.0 at start): one process alone 9.2 s with 1 thread, 9.4 s with both cores; two
processes at once 16.0 s each with 1 thread (1.7x alone), 32.3 s with both cores (3.5x; hist_gbm 15.7x, lightgbm
8.1x). Issue 12's 25 hist_gbm fits: 3.8 s alone, 3.9 s two at once with 1 thread; 4.6 s and 102 s with both cores.
At this data size the boosted trees gain nothing from more threads; a bigger table on a machine that fits alone
may set PULSE_MODEL_THREADS=all."""


def usable_cores() -> int:
    """The cores this process may run on: its CPU affinity (what a container's cpuset allows), not
    ``os.cpu_count()`` (every core of the host). A CPU quota (``docker --cpus``) is not seen by either."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


@dataclass(frozen=True)
class ModelingSettings:
    families: tuple[str, ...] = MODEL_FAMILIES
    choose_by: str = "pearson"
    cv_seeds: int = 5
    threads: int = DEFAULT_MODEL_THREADS  # OpenMP, BLAS and LightGBM threads per model fit (PULSE_MODEL_THREADS)
    cv_seed_rows: int = 10_000  # PULSE_CV_SEED_ROWS: the seeds x rated sessions cross-validation aims for
    refit_share: float = 0.1  # PULSE_MODEL_REFIT_SHARE: ratings since the kept fit, as a share of it, that refit


def model_threads(environ: Env | None = None) -> int:
    """PULSE_MODEL_THREADS: a whole number >= 1, or ``all`` for ``usable_cores()``; default
    ``DEFAULT_MODEL_THREADS``."""
    raw = _text(_env(environ), "PULSE_MODEL_THREADS")
    if raw is None:
        return DEFAULT_MODEL_THREADS
    if raw.lower() == "all":
        return usable_cores()
    try:
        threads = int(raw)
    except ValueError:
        threads = 0
    if threads < 1:
        raise SettingsError(
            f"PULSE_MODEL_THREADS={raw!r} must be a whole number of threads >= 1 or 'all' "
            f"(default {DEFAULT_MODEL_THREADS})"
        )
    return threads


def modeling_settings(environ: Env | None = None) -> ModelingSettings:
    env = _env(environ)
    listed = _text(env, "PULSE_MODEL_FAMILIES")
    families = tuple(f.strip() for f in listed.split(",") if f.strip()) if listed else MODEL_FAMILIES
    unknown = [f for f in families if f not in MODEL_FAMILIES]
    if unknown or not families:
        raise SettingsError(f"PULSE_MODEL_FAMILIES={listed!r}: choose from {', '.join(MODEL_FAMILIES)}")
    choose_by = (_text(env, "PULSE_MODEL_CHOICE") or "pearson").lower()
    if choose_by not in MODEL_CHOICES:
        raise SettingsError(f"PULSE_MODEL_CHOICE={choose_by!r}: choose one of {', '.join(MODEL_CHOICES)}")
    seeds = _integer(env, "PULSE_CV_SEEDS", 5)
    if seeds < 1:
        raise SettingsError(f"PULSE_CV_SEEDS={seeds} must be at least 1")
    seed_rows = _integer(env, "PULSE_CV_SEED_ROWS", 10_000)
    if seed_rows < 0:
        raise SettingsError(f"PULSE_CV_SEED_ROWS={seed_rows} must be 0 (always PULSE_CV_SEEDS) or more")
    refit_share = _number(env, "PULSE_MODEL_REFIT_SHARE", 0.1)
    if not refit_share >= 0:
        raise SettingsError(f"PULSE_MODEL_REFIT_SHARE={refit_share} must be 0 (refit at every run) or more")
    return ModelingSettings(
        families=families,
        choose_by=choose_by,
        cv_seeds=seeds,
        threads=model_threads(env),
        cv_seed_rows=seed_rows,
        refit_share=refit_share,
    )


# --- estimates -----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class EstimateSettings:
    auc_threshold: float = 0.6
    tolerance: float = 0.02
    segment_min_ratings: int = 10
    target_effect: float = 0.05
    benchmark_min_ratings: int = 35
    ask_budget: float | None = None  # PULSE_ASK_BUDGET: asks per day; None: ask_policy.default_budget


ASK_BUDGET = "PULSE_ASK_BUDGET"


def ask_budget(environ: Env | None = None) -> float | None:
    """PULSE_ASK_BUDGET: how many rating widgets the ask policy may show per day (expected asks, answered or not:
    what interrupts users, so what a team budgets; ``estimates/ask_policy.py`` says why asks and not ratings), a
    positive number; unset: ``ask_policy.default_budget`` (today's asks a day, else half the sessions a day)."""
    budget = _optional_number(_env(environ), ASK_BUDGET)
    if budget is not None and not 0 < budget < float("inf"):
        raise SettingsError(f"{ASK_BUDGET}={budget:g}: a positive number of asks per day (default: today's)")
    return budget


def estimate_settings(environ: Env | None = None) -> EstimateSettings:
    env = _env(environ)
    settings = EstimateSettings(
        auc_threshold=_number(env, "PULSE_SHIFT_AUC", 0.6),
        tolerance=_number(env, "PULSE_WIDTH_TOLERANCE", 0.02),
        segment_min_ratings=_integer(env, "PULSE_SEGMENT_MIN_RATINGS", 10),
        target_effect=_number(env, "PULSE_TARGET_EFFECT", 0.05),
        benchmark_min_ratings=_integer(env, "PULSE_BENCHMARK_MIN_RATINGS", 35),
        ask_budget=ask_budget(env),
    )
    if not settings.target_effect > 0:
        raise SettingsError(f"PULSE_TARGET_EFFECT must be positive, got {settings.target_effect}")
    if settings.segment_min_ratings < 2 or settings.benchmark_min_ratings < 2:
        raise SettingsError("PULSE_SEGMENT_MIN_RATINGS and PULSE_BENCHMARK_MIN_RATINGS must be at least 2")
    return settings


# --- hooks (`pulse hook`: run by the agents, so never fatal: hooks/cli.py turns a bad value into one stderr line) -


@dataclass(frozen=True)
class HookSettings:
    url: str = "http://127.0.0.1:8765"
    token_file: Path | None = None
    timeout: float = 2.0
    state_dir: Path = field(default_factory=lambda: Path("~/.local/state/pulse/hooks").expanduser())
    home: Path | None = None  # PULSE_HOME when set: where ``--drop`` hands logs (never ./data of the agent's cwd)


def hook_settings(environ: Env | None = None) -> HookSettings:
    """Where the hooks find the rating service, how long they wait for it (short: the agent waits for a hook),
    and where they keep what they showed the user (outside PULSE_HOME, which a hook's working directory, the
    user's project, would otherwise make ``./data`` there)."""
    env = _env(environ)
    url = (_text(env, "PULSE_HOOK_URL") or HookSettings.url).rstrip("/")
    if urlsplit(url).scheme not in ("http", "https") or not urlsplit(url).netloc:
        raise SettingsError(f"PULSE_HOOK_URL={url!r} is not an http(s) URL such as http://127.0.0.1:8765")
    timeout = _number(env, "PULSE_HOOK_TIMEOUT", HookSettings.timeout)
    if not 0 < timeout <= 60:
        raise SettingsError(f"PULSE_HOOK_TIMEOUT={timeout} must be a number of seconds above 0, at most 60")
    state = _path(env, "PULSE_HOOK_STATE")
    if state is None:
        base = _path(env, "XDG_STATE_HOME") or Path("~/.local/state").expanduser()
        state = base / "pulse" / "hooks"
    home = home_root(env) if _text(env, "PULSE_HOME") else None
    return HookSettings(url, _path(env, "PULSE_HOOK_TOKEN_FILE"), timeout, state, home)


# --- pulling from Langfuse (pulse pull langfuse, the pull sensor) ----------------------------------------------


LANGFUSE_PUBLIC_KEY = "PULSE_LANGFUSE_PUBLIC_KEY"
LANGFUSE_SECRET_KEY = "PULSE_LANGFUSE_SECRET_KEY"
LANGFUSE_HOST = "PULSE_LANGFUSE_HOST"


@dataclass(frozen=True)
class LangfuseSettings:
    """What ``pulse pull langfuse`` and the pull sensor read (``pull/``).

    The keys are a Langfuse project's API keys (HTTP basic auth: public key as user, secret key as password);
    neither is ever printed (``repr=False``), and the secret is never logged. ``host`` is the base URL, without
    a trailing ``/`` (Langfuse Cloud by default; a self-hosted instance's URL, with its path prefix if any).
    ``interval_seconds``: how often the pull sensor pulls under ``pulse ui``. ``overlap_seconds``: each pull asks
    again for this much time before the previous pull's end, because Langfuse ingests asynchronously and an
    observation is listed by its start time (a span that ran an hour is written when it ends, an hour after its
    start): what was already pulled and is unchanged is recognised and not written again."""

    public_key: str | None = field(default=None, repr=False)
    secret_key: str | None = field(default=None, repr=False)
    host: str = "https://cloud.langfuse.com"
    interval_seconds: int = 300
    overlap_seconds: int = 3600

    @property
    def configured(self) -> bool:
        """Both keys are set: the pull sensor pulls only then."""
        return bool(self.public_key and self.secret_key)


def langfuse_settings(environ: Env | None = None) -> LangfuseSettings:
    """PULSE_LANGFUSE_*: the keys (None when unset: the caller says what is missing), the host (an http(s) URL),
    the sensor's interval (60 s to a day) and the overlap (0 to 30 days)."""
    env = _env(environ)
    host = (_text(env, LANGFUSE_HOST) or LangfuseSettings.host).rstrip("/")
    parts = urlsplit(host)
    if parts.scheme not in ("http", "https") or not parts.netloc or parts.query or parts.fragment or parts.username:
        raise SettingsError(
            f"{LANGFUSE_HOST}={host!r} is not an http(s) base URL such as https://cloud.langfuse.com (no user,"
            " query or fragment)"
        )
    interval = _integer(env, "PULSE_LANGFUSE_PULL_INTERVAL", LangfuseSettings.interval_seconds)
    if not 60 <= interval <= 86400:
        raise SettingsError(f"PULSE_LANGFUSE_PULL_INTERVAL={interval}: seconds, 60 to 86400 (default 300)")
    overlap = _integer(env, "PULSE_LANGFUSE_PULL_OVERLAP", LangfuseSettings.overlap_seconds)
    if not 0 <= overlap <= 30 * 86400:
        raise SettingsError(f"PULSE_LANGFUSE_PULL_OVERLAP={overlap}: seconds, 0 to 2592000 (default 3600)")
    return LangfuseSettings(
        public_key=_text(env, LANGFUSE_PUBLIC_KEY),
        secret_key=_text(env, LANGFUSE_SECRET_KEY),
        host=host,
        interval_seconds=interval,
        overlap_seconds=overlap,
    )


# --- the rating service (pulse serve) ---------------------------------------------------------------------------


SERVE_TOKENS = "PULSE_SERVE_TOKENS"
MIN_TOKEN_CHARS = 16


@dataclass(frozen=True)
class ServeSettings:
    """What ``pulse serve`` reads (``serve/``).

    ``tokens``: the bearer tokens of PULSE_SERVE_TOKENS's file (one a line; blank lines and ``#`` comments skipped),
    None when unset (no auth: the service then listens on loopback only). ``rate_limit``: requests a second each
    token (each client address without auth) may make, with a burst of twice that; 0 turns it off.
    ``roll_records`` / ``roll_seconds``: the journal rolls into a drop file when this many records wait, or when
    the oldest waiting record is this old, whichever comes first (and at shutdown). Why 5 000 and 30 s: each roll
    is a new file in the day's drop folder, which the drop sensor loads again whole; at the target load of 2 000
    ratings a second that is a roll every 2.5 s, and at a team's pace one every 30 s, well inside the 3 minutes
    the warehouse may lag."""

    tokens: tuple[str, ...] | None = field(default=None, repr=False)  # never printed
    tokens_file: Path | None = None
    rate_limit: float = 100.0
    roll_records: int = 5000
    roll_seconds: float = 30.0


def read_tokens(path: Path) -> tuple[str, ...]:
    """The tokens of a PULSE_SERVE_TOKENS file; SettingsError (naming the file, never a token) when it cannot be
    read, holds none, or holds one shorter than ``MIN_TOKEN_CHARS`` or with white space inside."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        why = error.strerror if isinstance(error, OSError) and error.strerror else "not UTF-8 text"
        raise SettingsError(f"{SERVE_TOKENS}={path}: the tokens file cannot be read ({why})") from None
    tokens = []
    for number, line in enumerate(text.splitlines(), 1):
        token = line.strip()
        if not token or token.startswith("#"):
            continue
        if len(token) < MIN_TOKEN_CHARS or any(c.isspace() for c in token):
            raise SettingsError(
                f"{SERVE_TOKENS}={path}, line {number}: a token must be at least {MIN_TOKEN_CHARS} characters without"
                " spaces (e.g. `python -c 'import secrets; print(secrets.token_urlsafe(32))'`)"
            )
        tokens.append(token)
    if not tokens:
        raise SettingsError(f"{SERVE_TOKENS}={path} holds no token: one a line (or unset it for no auth on loopback)")
    return tuple(tokens)


def serve_settings(environ: Env | None = None) -> ServeSettings:
    env = _env(environ)
    tokens_file = _path(env, SERVE_TOKENS)
    rate = _number(env, "PULSE_SERVE_RATE_LIMIT", 100.0)
    if not rate >= 0 or rate == float("inf"):
        raise SettingsError(f"PULSE_SERVE_RATE_LIMIT={rate}: requests a second, 0 or more (0: no limit; default 100)")
    records = _integer(env, "PULSE_SERVE_ROLL_RECORDS", 5000)
    if records < 1:
        raise SettingsError(f"PULSE_SERVE_ROLL_RECORDS={records}: a whole number above 0 (default 5000)")
    seconds = _number(env, "PULSE_SERVE_ROLL_SECONDS", 30.0)
    if not 0 < seconds < 86400:
        raise SettingsError(f"PULSE_SERVE_ROLL_SECONDS={seconds}: seconds above 0, under a day (default 30)")
    return ServeSettings(
        tokens=read_tokens(tokens_file) if tokens_file else None,
        tokens_file=tokens_file,
        rate_limit=rate,
        roll_records=records,
        roll_seconds=seconds,
    )
