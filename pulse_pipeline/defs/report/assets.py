"""The report: ``PULSE_HOME/report/index.html`` rebuilt after the tables it shows (``report/`` builds it)."""

from pathlib import Path

import dagster as dg

from ... import tables
from ...report.build import REPORT_FILE, write_report
from ..resources import WarehouseResource
from ..specs import EAGER, key

REPORT_KEY = dg.AssetKey(["report", "index_html"])
# every table the page reads (report/data.py): the report is rebuilt when any of them is
READS = (
    tables.STAGING_SESSIONS,  # which sessions the generator made: the synthetic banner
    tables.EXPERIMENT_EFFECTS,
    tables.POWER,
    tables.CONCLUSIONS,  # the method each comparison is read by, and its sentence
    tables.PREDICTIONS,
    tables.SESSION_LABELS,
    tables.CV_METRICS,
    tables.RECALIBRATION,  # which predictions each method read (the Table 2 section)
    tables.LABEL_SHIFT,
    tables.FEATURE_COMPARISONS,
    tables.BENCHMARK_POINTS,
    tables.BENCHMARK_CORRELATION,
    tables.SEGMENT_EFFECTS,
    tables.SRM_CHECK,
    tables.EFFECT_HISTORY,
    tables.ASK_POLICY,
    tables.AGREEMENT_HISTORY,  # the agreement watch (section 11)
)
MIN_BYTES = 5_000  # the page with every section empty is larger: smaller means it was cut short


class ReportResource(dg.ConfigurableResource):
    """Where the report is written (``PULSE_HOME/report``, see ``paths.py``), and where its figures are kept between
    builds (``PULSE_HOME/.work/figures``: ``report/drawing.drawn_once``; empty: none kept)."""

    folder: str
    figure_cache: str = ""


@dg.asset(
    key=REPORT_KEY,
    deps=[key(t) for t in READS],
    group_name="report",
    kinds={"html"},
    automation_condition=EAGER,
    description="The self-contained HTML report (PULSE_HOME/report/index.html): effects per experiment with "
    "figures, the model, the diagnostics around the estimate, the history. Not a table: a file.",
)
def index_html(warehouse: WarehouseResource, report: ReportResource) -> dg.MaterializeResult:
    with warehouse.warehouse() as wh:  # read only; the page names the published copy analysts open
        cache = Path(report.figure_cache) if report.figure_cache else None
        written = write_report(wh.con, Path(report.folder), source=warehouse.publish_to, figure_cache=cache)
    return dg.MaterializeResult(
        metadata={
            "path": dg.MetadataValue.path(str(written.path)),
            "sections": written.sections,
            "figures": written.figures,
            "bytes": written.bytes,
        }
    )


@dg.asset_check(asset=REPORT_KEY, blocking=False, description=f"The report file exists and is over {MIN_BYTES} bytes.")
def report_is_written(report: ReportResource) -> dg.AssetCheckResult:
    path = Path(report.folder) / REPORT_FILE
    size = path.stat().st_size if path.is_file() else 0
    return dg.AssetCheckResult(
        passed=size > MIN_BYTES,
        description=None if size > MIN_BYTES else f"{path}: {'missing' if not size else f'only {size} bytes'}",
        metadata={"bytes": size},
    )
