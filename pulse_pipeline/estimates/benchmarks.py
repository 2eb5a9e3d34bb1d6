"""Do human ratings move with benchmarks? Per-cluster rating differences against benchmark differences.

The paper (Section 7, Table 3) compares, per task cluster, the change in human ratings ΔH between two LLMs with
the change in a benchmark score ΔB, and reports their Pearson correlation. The benchmark side is a small CSV
(``PULSE_HOME/benchmarks.csv``, else the shipped default ``pulse_pipeline/defaults/benchmarks.csv`` with the paper's
ΔB column; ``paths.PulseHome.benchmarks_file``)::

    # comment lines start with '#'
    treatment,control,cluster,benchmark,delta_b,source
    claude-4-sonnet,claude-3.7-sonnet,Testing code,SWT-Bench,22.8,PULSE paper Table 3: SWT-Bench

``delta_b`` is treatment - control in percentage points; ``cluster`` is one of the rubric's development clusters
(matched case-insensitively, written back in the rubric's spelling); ``source`` may be blank.

:func:`read_benchmarks` parses the file and returns its bad lines as problem rows; :func:`load_benchmarks`, what the
stage and the preflight (``preflight.check_settings``) call, refuses a file with any bad line, in one line
naming the file, the line and the reason, before any work starts. One case stays a table row instead: a rubric
without a ``development_cluster`` feature (a rubric of your own) gives no cluster to match, so every line is a
``rejected`` point saying so, rather than a file that cannot be used with that rubric stopping every run.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from pulse_pipeline.features.rubric import Rubric, RubricError, load_rubric
from pulse_pipeline.features.wide import option_column
from pulse_pipeline.stats.correlation import correlations

CLUSTER_FEATURE = "development_cluster"
NO_CLUSTER_FEATURE = "none: the rubric has no development_cluster feature"
REQUIRED = ("treatment", "control", "cluster", "benchmark", "delta_b")
BENCHMARK_SCHEMA = {
    "treatment": pl.Utf8,
    "control": pl.Utf8,
    "cluster": pl.Utf8,
    "benchmark": pl.Utf8,
    "delta_b": pl.Float64,
    "source": pl.Utf8,
}
PROBLEM_SCHEMA = {"line": pl.Int64, "raw": pl.Utf8, "reason": pl.Utf8}
RATING_SCHEMA = {"session_id": pl.Utf8, "variant": pl.Utf8, "cluster": pl.Utf8, "label": pl.Float64}
DELTA_SCHEMA = {
    "treatment": pl.Utf8,
    "control": pl.Utf8,
    "cluster": pl.Utf8,
    "n_treatment": pl.Int64,
    "n_control": pl.Int64,
    "mean_treatment": pl.Float64,
    "mean_control": pl.Float64,
    "delta_h": pl.Float64,
    "status": pl.Utf8,
    "reason": pl.Utf8,
}
POINT_SCHEMA = {
    "treatment": pl.Utf8,
    "control": pl.Utf8,
    "cluster": pl.Utf8,
    "benchmark": pl.Utf8,
    "delta_b": pl.Float64,
    "delta_h": pl.Float64,
    "n_treatment": pl.Int64,
    "n_control": pl.Int64,
    "status": pl.Utf8,
    "reason": pl.Utf8,
}
SUMMARY_SCHEMA = {
    "treatment": pl.Utf8,
    "control": pl.Utf8,
    "measure": pl.Utf8,
    "n_clusters": pl.Int64,
    "coefficient": pl.Float64,
    "ci_low": pl.Float64,
    "ci_high": pl.Float64,
    "note": pl.Utf8,
}


def _frames(rows: list[dict], problems: list[dict]) -> tuple[pl.DataFrame, pl.DataFrame]:
    return pl.DataFrame(rows, schema=BENCHMARK_SCHEMA), pl.DataFrame(problems, schema=PROBLEM_SCHEMA)


def _development_clusters(rubric: Rubric | None) -> dict[str, str]:
    """lower-cased cluster -> the rubric's spelling (empty when the rubric has no development_cluster feature)."""
    rubric = rubric or load_rubric()
    try:
        options = rubric.get(CLUSTER_FEATURE).options
    except KeyError:
        return {}
    return {o.lower(): o for o in options}


def _delta(text: str) -> float | None:
    """The number in ``text`` (a trailing '%' is allowed), None if it is not a finite number."""
    try:
        value = float(text.removesuffix("%").strip())
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _check_row(values: dict[str, str], clusters: dict[str, str]) -> str | None:
    empty = [c for c in REQUIRED if not values[c]]
    if empty:
        return f"no value for {', '.join(empty)}"
    if _delta(values["delta_b"]) is None:
        return f"delta_b {values['delta_b']!r} is not a number"
    if values["cluster"].lower() not in clusters:
        known = ", ".join(clusters.values()) or NO_CLUSTER_FEATURE
        return f"cluster {values['cluster']!r} is not a development cluster of the rubric ({known})"
    if values["treatment"] == values["control"]:
        return "treatment and control are the same variant"
    return None


def read_benchmarks(path: Path, rubric: Rubric | None = None) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The benchmark differences in the CSV at ``path`` and the problems found reading it.

    Returns ``(rows, problems)``:

    - rows: treatment, control, cluster (the rubric's spelling), benchmark, delta_b (Float64), source (null when
      blank), one per valid line, in file order;
    - problems: line (1-based; 0 for the file as a whole), raw (the line's text), reason. A line is a problem when
      a required value is blank or missing, delta_b is not a number, the cluster is not one of the rubric's
      development clusters (``rubric``, default :func:`load_rubric`), treatment equals control, or it repeats the
      (treatment, control, cluster) of an earlier line (the first is kept). A missing or unreadable file, a missing
      header or a header without a required column gives a single problem and no rows.
    """
    try:
        text = Path(path).read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        return _frames([], [{"line": 0, "raw": "", "reason": f"no benchmarks file at {path}"}])
    except (OSError, UnicodeDecodeError) as exc:
        return _frames([], [{"line": 0, "raw": "", "reason": f"cannot read {path}: {exc}"}])
    try:
        clusters = _development_clusters(rubric)
    except (OSError, RubricError) as exc:
        return _frames([], [{"line": 0, "raw": "", "reason": f"cannot read the rubric: {exc}"}])

    header: list[str] | None = None
    rows: list[dict] = []
    problems: list[dict] = []
    seen: dict[tuple[str, str, str], int] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip() or raw.lstrip().startswith("#"):
            continue
        fields = [f.strip() for f in next(csv.reader([raw]))]
        if header is None:
            header = [f.lower() for f in fields]
            missing = [c for c in REQUIRED if c not in header]
            if missing:
                reason = f"header lacks column {', '.join(missing)} (needs {', '.join(REQUIRED)}, source optional)"
                return _frames([], [{"line": number, "raw": raw, "reason": reason}])
            continue
        if len(fields) > len(header):
            problems.append({"line": number, "raw": raw, "reason": f"{len(fields)} fields, header has {len(header)}"})
            continue
        values = dict(zip(header, fields + [""] * (len(header) - len(fields)), strict=True))
        reason = _check_row(values, clusters)
        key = (values["treatment"], values["control"], values["cluster"].lower())
        if reason is None and key in seen:
            reason = f"repeats treatment, control and cluster of line {seen[key]} (the first is kept)"
        if reason is not None:
            problems.append({"line": number, "raw": raw, "reason": reason})
            continue
        seen[key] = number
        rows.append(
            {
                "treatment": values["treatment"],
                "control": values["control"],
                "cluster": clusters[key[2]],
                "benchmark": values["benchmark"],
                "delta_b": _delta(values["delta_b"]),
                "source": values.get("source") or None,
            }
        )
    if header is None:
        problems.append({"line": 0, "raw": "", "reason": f"{path} has no header line"})
    return _frames(rows, problems)


def load_benchmarks(path: Path, rubric: Rubric | None = None) -> tuple[pl.DataFrame, pl.DataFrame]:
    """:func:`read_benchmarks`, refusing a bad file: returns ``(rows, problems)`` where problems are only the lines
    rejected because the rubric has no development clusters (see the module docstring); any other problem raises
    ``settings_files.SettingsFileError`` with the file, the first bad line and its reason (and how many more)."""
    from ..settings_files import SettingsFileError

    rows, problems = read_benchmarks(path, rubric)
    refused = problems.filter(~pl.col("reason").str.ends_with(f"({NO_CLUSTER_FEATURE})"))
    if not refused.is_empty():
        first = refused.row(0, named=True)
        more = f" (and {refused.height - 1} more bad line(s))" if refused.height > 1 else ""
        raise SettingsFileError(path, f"{first['reason']}{more}", first["line"] or None)
    return rows, problems


def _rated(ratings: pl.DataFrame) -> pl.DataFrame:
    """The rows of ``ratings`` with a cluster and a rating (label cast to Float64)."""
    rated = ratings.with_columns(pl.col("label").cast(pl.Float64))
    return rated.filter(pl.col("cluster").is_not_null() & pl.col("label").is_not_null() & pl.col("label").is_not_nan())


def human_deltas(ratings: pl.DataFrame, comparisons: Iterable[tuple[str, str]], min_ratings: int) -> pl.DataFrame:
    """Per comparison and cluster, the difference of the mean normalized rating between the two arms.

    ``ratings`` has columns session_id, variant, cluster, label: one row per rated session and cluster the session
    belongs to (a session in two clusters counts in both), label the rating normalized to [0, 1]. Rows with a null
    cluster or a null/NaN label are ignored. For each (treatment, control) in ``comparisons`` and each cluster
    either arm has ratings in::

        n_t, n_c = number of ratings of the cluster in each arm
        delta_h  = 100 · (mean(label_t) - mean(label_c))     (percentage points of the 0-1 rating)

    The paper does not define its ΔH precisely ("the change in human ratings", shown in %); this is the difference
    of mean normalized ratings, in percentage points, so it shares the units of a ΔB in percentage points.

    Returns columns treatment, control, cluster, n_treatment, n_control, mean_treatment, mean_control, delta_h
    (null when an arm has no ratings), status ("used" when both arms have >= min_ratings ratings, else "skipped")
    and reason (null when used, else the counts). A comparison one of whose arms has no ratings at all gives no
    rows (:func:`benchmark_correlation` reports it as a comparison without ratings).
    """
    arms = _rated(ratings).group_by("variant", "cluster").agg(n=pl.len(), mean=pl.col("label").mean())
    by_arm = {(r["variant"], r["cluster"]): (r["n"], r["mean"]) for r in arms.iter_rows(named=True)}
    variants = {v for v, _ in by_arm}
    rows = []
    for treatment, control in dict.fromkeys(comparisons):
        if treatment not in variants or control not in variants:
            continue
        present = sorted({c for v, c in by_arm if v in (treatment, control)})
        for cluster in present:
            n_t, mean_t = by_arm.get((treatment, cluster), (0, None))
            n_c, mean_c = by_arm.get((control, cluster), (0, None))
            used = n_t >= min_ratings and n_c >= min_ratings
            rows.append(
                {
                    "treatment": treatment,
                    "control": control,
                    "cluster": cluster,
                    "n_treatment": n_t,
                    "n_control": n_c,
                    "mean_treatment": mean_t,
                    "mean_control": mean_c,
                    "delta_h": None if n_t == 0 or n_c == 0 else 100.0 * (mean_t - mean_c),
                    "status": "used" if used else "skipped",
                    "reason": None if used else f"{n_t} treatment and {n_c} control ratings (< {min_ratings} per arm)",
                }
            )
    return pl.DataFrame(rows, schema=DELTA_SCHEMA)


def benchmark_correlation(
    benchmarks: pl.DataFrame, ratings: pl.DataFrame, *, min_ratings: int = 35
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Per comparison in ``benchmarks``, the correlation across clusters of ΔH (:func:`human_deltas`) with ΔB.

    Clusters are matched exactly: :func:`read_benchmarks` writes them in the rubric's spelling, as the annotator
    does. Returns ``(points, summary)``:

    - points: treatment, control, cluster, benchmark, delta_b, delta_h, n_treatment, n_control, status, reason. One
      row per benchmark row (skipped when the ratings lack the comparison or the cluster, or an arm has fewer than
      ``min_ratings`` ratings; the paper required 35), then one skipped row per cluster the ratings have for a
      benchmarked comparison but the benchmarks lack (benchmark and delta_b null).
    - summary: treatment, control, measure ("pearson", "spearman"), n_clusters (used points), coefficient, ci_low,
      ci_high, note: :func:`pulse_pipeline.stats.correlation.correlations` of (delta_h, delta_b) over the used
      points (Fisher-z intervals). Fewer than 3 used points gives NaN and says so in the note.
    """
    comparisons = list(dict.fromkeys(zip(benchmarks["treatment"], benchmarks["control"], strict=True)))
    deltas = human_deltas(ratings, comparisons, min_ratings)
    found = {(r["treatment"], r["control"], r["cluster"]): r for r in deltas.iter_rows(named=True)}
    rated = {key[:2] for key in found}
    variants = set(_rated(ratings)["variant"])
    points = []
    for b in benchmarks.iter_rows(named=True):
        key = (b["treatment"], b["control"], b["cluster"])
        h = found.get(key)
        point = {k: b[k] for k in ("treatment", "control", "cluster", "benchmark", "delta_b")}
        if h is None:
            reason = "no ratings for this cluster"
            if key[:2] not in rated:
                unrated = [v for v in key[:2] if v not in variants]
                reason = "no ratings for this comparison: none for " + " and ".join(unrated)
            point |= {"delta_h": None, "n_treatment": 0, "n_control": 0, "status": "skipped", "reason": reason}
        else:
            point |= {k: h[k] for k in ("delta_h", "n_treatment", "n_control", "status", "reason")}
        points.append(point)
    benchmarked = set(zip(benchmarks["treatment"], benchmarks["control"], benchmarks["cluster"], strict=True))
    for key, h in found.items():
        if key not in benchmarked:
            extra = {k: h[k] for k in ("treatment", "control", "cluster", "delta_h", "n_treatment", "n_control")}
            points.append(extra | {"status": "skipped", "reason": "no benchmark row for this cluster"})
    points_df = pl.DataFrame(points, schema=POINT_SCHEMA)

    summary = []
    for treatment, control in comparisons:
        used = points_df.filter(
            (pl.col("treatment") == treatment) & (pl.col("control") == control) & (pl.col("status") == "used")
        )
        for c in correlations(used["delta_h"], used["delta_b"]):
            summary.append(
                {
                    "treatment": treatment,
                    "control": control,
                    "measure": c.measure,
                    "n_clusters": used.height,
                    "coefficient": c.coefficient,
                    "ci_low": c.ci_low,
                    "ci_high": c.ci_high,
                    "note": c.note,
                }
            )
    return points_df, pl.DataFrame(summary, schema=SUMMARY_SCHEMA)


def cluster_ratings(sessions: pl.DataFrame, clusters: Iterable[str]) -> pl.DataFrame:
    """session_id, variant, cluster, label: one row per rated session and development cluster it is in.

    ``sessions``: an ``estimates.sessions.assigned_sessions`` frame, where a session in cluster c has 1 in column
    ``option_column("development_cluster", c)``. A cluster without its column (the feature stage has not run, or
    the rubric changed) has no sessions.
    """
    # a session in two experiments whose arms share a name (a randomized llm-backbone and a model read from the
    # sessions' metadata) is one rating of that arm, not two
    rated = sessions.filter(pl.col("labeled")).unique(["session_id", "variant"], keep="first", maintain_order=True)
    parts = []
    for cluster in clusters:
        column = option_column(CLUSTER_FEATURE, cluster)
        if column in rated.columns:
            members = rated.filter(pl.col(column) == 1)
            parts.append(members.select("session_id", "variant", pl.lit(cluster).alias("cluster"), "label"))
    return pl.concat(parts) if parts else pl.DataFrame(schema=RATING_SCHEMA)


def rejected_points(problems: pl.DataFrame) -> pl.DataFrame:
    """Benchmark-file lines that could not be used, as ``rejected`` points (so none is silently lost)."""
    return pl.DataFrame(
        [
            {"benchmark": raw, "status": "rejected", "reason": f"benchmarks.csv line {line}: {reason}"}
            for line, raw, reason in problems.select("line", "raw", "reason").iter_rows()
        ],
        schema=POINT_SCHEMA,
    )


@dataclass(frozen=True)
class BenchmarkTables:
    points: pl.DataFrame  # estimates.benchmark_points: every benchmark row's point, then the rejected file lines
    correlation: pl.DataFrame  # estimates.benchmark_correlation
    rejected_lines: int  # lines of the file that could not be used


def build_benchmark_tables(path: Path, rubric: Rubric, sessions: pl.DataFrame, min_ratings: int) -> BenchmarkTables:
    """Both benchmark tables, from the file at ``path`` and the ratings of ``sessions`` (see :func:`cluster_ratings`).

    The points are :func:`benchmark_correlation`'s, followed by one ``rejected`` point per problem line of the file.
    """
    benchmarks, problems = load_benchmarks(path, rubric)
    ratings = cluster_ratings(sessions, _development_clusters(rubric).values())
    points, correlation = benchmark_correlation(benchmarks, ratings, min_ratings=min_ratings)
    return BenchmarkTables(pl.concat([points, rejected_points(problems)]), correlation, problems.height)
