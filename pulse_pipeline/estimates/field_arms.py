"""Arms without an assignment file: each session's arm read from one of its fields (``arms_from`` in
``experiments.toml``, :class:`experiments.ArmsFrom`).

A team that never randomized anything still has sessions run with different models, agent versions or Langfuse
releases, and wants to know whether they are rated differently. The field is a ``staging.sessions`` column
(``source_format``, ...) or a key of its ``metadata_json`` (``metadata.model``; ``metadata.release``,
``metadata.version``, ``metadata.metadata.<key>`` for Langfuse traces): the adapters keep there what they learn of
the whole session. A session's arm is the field's value as text (a number or true/false too); a session without
the field, with a null, empty or non-scalar value (an object, a list), or with a value outside the experiment's
``arms`` is in no arm of that experiment: counted, and said in the note every row of the experiment carries.

These arms were not randomized, so the experiment's design is ``observational``: a difference between its arms
is an association (the sessions differ in whatever else went with the field: who chose the model, for which
tasks), not the effect of the change. The report shows beside it how the arms differ in their features and in who
rated (``report/sections/effects.py``).
"""

from __future__ import annotations

import json

import polars as pl

from .. import tables
from ..warehouse import Warehouse
from .experiments import OBSERVATIONAL, ArmsFrom

COLUMNS = ("session_id", "experiment", "variant", "user_id", "design", "design_note")
"""The columns of a field-arms frame: an ``staging.assignments`` row's, the experiment's design and its note."""
SCALAR_JSON_TYPES = ("VARCHAR", "BIGINT", "UBIGINT", "DOUBLE", "BOOLEAN")
"""DuckDB's ``json_type`` of a metadata value that can be an arm (text, number, true/false)."""


def field_values_sql(spec: ArmsFrom) -> str:
    """``session_id, user_id, value`` for every staged session: ``value`` the field's text, NULL when the session
    has none usable (missing, JSON null, an object or a list, or blank)."""
    path = spec.metadata_path
    if path is None:
        value = f'CAST(s."{spec.field}" AS VARCHAR)'
    else:
        json_path = ("$." + ".".join(json.dumps(key) for key in path)).replace("'", "''")  # a SQL literal
        found = f"json_extract(s.metadata_json, '{json_path}')"
        scalar = ", ".join(f"'{t}'" for t in SCALAR_JSON_TYPES)
        value = (
            f"CASE WHEN json_type({found}) IN ({scalar}) THEN json_extract_string(s.metadata_json, '{json_path}') END"
        )
    return f"""
        SELECT s.session_id, s.user_id, nullif(trim({value}), '') AS value
        FROM {tables.STAGING_SESSIONS.qualified} s ORDER BY s.session_id"""


def field_arms(values: pl.DataFrame, experiment: str, spec: ArmsFrom) -> pl.DataFrame:
    """The sessions of ``values`` (``session_id``, ``user_id``, ``value``: :func:`field_values_sql`) that have an
    arm of ``experiment``, one row each (:data:`COLUMNS`), every row with the note that says where the arms came
    from and how many sessions are in none."""
    usable = values.filter(pl.col("value").is_not_null())
    kept = usable if spec.arms is None else usable.filter(pl.col("value").is_in(list(spec.arms)))
    note = design_note(spec, values.height - usable.height, usable.height - kept.height)
    return kept.select(
        "session_id",
        pl.lit(experiment, pl.Utf8).alias("experiment"),
        pl.col("value").alias("variant"),
        pl.col("user_id").cast(pl.Utf8),
        pl.lit(OBSERVATIONAL, pl.Utf8).alias("design"),
        pl.lit(note, pl.Utf8).alias("design_note"),
    )


def design_note(spec: ArmsFrom, without: int, outside: int) -> str:
    """What every row of an observational experiment says: where its arms came from, that they were not
    randomized, and how many sessions are in no arm (``without``: no usable value; ``outside``: a value not in
    ``spec.arms``)."""
    text = f"observational: arms from the session field {spec.field}, not randomized (an association, not an effect)"
    left = []
    if without:
        left.append(f"{without} session(s) without {spec.field}")
    if outside:
        left.append(f"{outside} with a value outside its arms")
    return text + ("; in no arm: " + ", ".join(left) if left else "")


def empty_frame() -> pl.DataFrame:
    """A field-arms frame with no row."""
    return pl.DataFrame(schema={c: pl.Utf8 for c in COLUMNS})


def read_field_arms(wh: Warehouse, arms_from: dict[str, ArmsFrom], assigned: set[str]) -> pl.DataFrame:
    """Every observational experiment's arms (:func:`field_arms`) for the experiments of ``arms_from``
    (``experiments.read_arms_from``) that have no assignment (``assigned``: the experiments of
    ``staging.assignments``; assignments win)."""
    frames = [
        field_arms(wh.frame(field_values_sql(spec)), name, spec)
        for name, spec in sorted(arms_from.items())
        if name not in assigned
    ]
    return pl.concat([empty_frame(), *frames], how="vertical_relaxed") if frames else empty_frame()
