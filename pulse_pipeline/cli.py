"""The ``pulse`` command line. State lives under PULSE_HOME (default ./data); see ``paths.py``."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from . import progress, tables
from .hooks.cli import add_arguments as hook_arguments
from .hooks.cli import main as hook_main
from .paths import HUMAN_LABELS, PROJECT_ROOT, PulseHome

if TYPE_CHECKING:  # only a type: importing runs loads Dagster, which `pulse hook` must not wait for
    from .runs import DropSummary


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _published_here(home: PulseHome) -> None:
    """Make sure the analysts' file is what PULSE published for this home, before PULSE reads it: publish it again
    if it reads the files of a home this one was moved or copied from (``lake.reads_elsewhere``, asked first: its
    line says more), or if a connection wrote to it since it was published (``publish.written_since_published``:
    a WAL beside it, or its size or time changed); if it cannot, a RuntimeError says why and what to run (``main``
    prints it in one line). The checks open the file read-only and ``stat`` it: Dagster is loaded when it must
    publish."""
    from .lake import reads_elsewhere
    from .publish import written_since_published

    old = reads_elsewhere(home.warehouse) if home.warehouse.is_file() else None
    if old is not None:
        from .runs import publish_again_here

        reason = publish_again_here(home, old, _say)
        if reason:
            raise RuntimeError(reason)
        return
    why = written_since_published(home.warehouse) if home.warehouse.is_file() else None
    if why is not None:
        _publish_again(home, why)


def _publish_again(home: PulseHome, why: str) -> None:
    """Publish the analysts' file again because ``why`` (one line), or raise a RuntimeError saying why not."""
    from .runs import publish_again

    reason = publish_again(home, why, _say)
    if reason:
        raise RuntimeError(reason)


def _open_published(home: PulseHome):
    """The analysts' file opened read-only for PULSE's own readers, only once it is what PULSE published
    (``_published_here``). An analyst's read-write connection open on it holds DuckDB's lock, and a read-only
    open fails ("Could not set lock"): then it is published again (a new file renamed over it; the analyst keeps
    the old one) and opened once more."""
    import duckdb

    _published_here(home)
    try:
        return duckdb.connect(str(home.warehouse), read_only=True)
    except duckdb.IOException as error:
        if "lock" not in str(error).lower():
            raise
    _publish_again(home, f"{home.warehouse} is held open for writing by another connection")
    return duckdb.connect(str(home.warehouse), read_only=True)


def cmd_ingest(args: argparse.Namespace) -> int:
    """Exit 0, or 1 when the counts do not reconcile or (``--strict``) anything was quarantined; 2 when the drop
    is refused (missing, empty, or a different drop of that name already there)."""
    from dataclasses import asdict

    from .runs import ingest

    with progress.showing(not args.json):
        summary = ingest(PulseHome.from_env(), Path(args.path), name=args.name, say=_say)
    strict_failed = args.strict and summary.quarantined > 0
    if args.json:
        print(json.dumps(asdict(summary), indent=2))
    else:
        _print_drop_summary(summary)
    if strict_failed:
        _say(f"pulse ingest --strict: {summary.quarantined} records of drop {summary.drop} were quarantined (exit 1)")
    return 0 if summary.reconciled and not strict_failed else 1


def _print_drop_summary(summary: DropSummary) -> None:
    """What ``pulse ingest`` (and ``pulse pull`` after it) prints of a drop it ran: counts, quarantine reasons,
    replaced sessions, where the warehouse and the settings files are."""
    from .quarantine import summary_lines

    print(
        f"drop {summary.drop}: {summary.sessions} sessions, {summary.events} events, {summary.segments} "
        f"segments, {summary.ratings} ratings, {summary.asks} asks, {summary.assignments} assignments, "
        f"{summary.quarantined} quarantined{'' if summary.reconciled else ' (COUNTS DO NOT RECONCILE)'}"
    )
    for line in [*summary_lines(summary.quarantine_reasons, summary.drop), *summary.replacement_lines()]:
        print(line)
    print(f"warehouse: {summary.warehouse}")
    print("\n".join(PulseHome.from_env().settings_lines()))


def cmd_quarantine(args: argparse.Namespace) -> int:
    """Print the published warehouse's quarantine by reason: how many records, where the first few are."""
    from dataclasses import asdict

    import duckdb

    from .quarantine import reasons, rows_query

    home = PulseHome.from_env()
    if not home.warehouse.exists():
        raise UsageError(f"no warehouse at {home.warehouse} yet: run `pulse ingest PATH` or `pulse demo` first")
    try:
        with _open_published(home) as con:
            known = [d for (d,) in con.execute(f"SELECT drop_id FROM {tables.DROPS.qualified} ORDER BY 1").fetchall()]
            if args.drop is not None and args.drop not in known:
                raise UsageError(f"no drop {args.drop!r} in {home.warehouse}; its drops: {', '.join(known) or 'none'}")
            found = reasons(con, args.drop)
    except duckdb.Error as error:  # not a warehouse, or one PULSE cannot read: said in one line
        raise UsageError(f"cannot read the quarantine of {home.warehouse}: {str(error).splitlines()[0]}") from None
    if args.json:
        print(json.dumps([asdict(r) for r in found], indent=2))
        return 0
    total = sum(r.count for r in found)
    where = f"drop {args.drop}" if args.drop is not None else "all drops"
    print(
        f"{total} records quarantined in {where}, {len(found)} reasons" if found else f"nothing quarantined in {where}"
    )
    for r in found:
        print(f"{r.count:>7}  {r.reason}  [{r.stage}]")
        print(f"         e.g. {'; '.join(r.examples)}")
    if found:
        print(f'every record with its raw text: pulse sql "{rows_query(args.drop)}"')
    return 0


def cmd_drop_ls(args: argparse.Namespace) -> int:
    """Every drop the warehouse or the drop folder holds: fingerprint, when loaded, sessions, quarantined, state."""
    from dataclasses import asdict

    from .runs import drop_list

    states = drop_list(PulseHome.from_env())
    if args.json:
        print(json.dumps([asdict(s) for s in states], indent=2, default=str))
        return 0
    if not states:
        print(f"no drops in {PulseHome.from_env().root}: `pulse ingest PATH` adds one")
        return 0
    header = ("drop", "fingerprint", "loaded at (UTC)", "sessions", "quarantined", "state")
    lines = [
        (s.drop, s.fingerprint or "-", str(s.loaded_at or "-"), str(s.sessions), str(s.quarantined), s.state)
        for s in states
    ]
    widths = [max(len(row[i]) for row in [header, *lines]) for i in range(len(header) - 1)]
    for row in [header, *lines]:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=False)) + "  " + row[-1])
    return 0


def cmd_drop_rm(args: argparse.Namespace) -> int:
    """Remove a drop's rows from every raw table and its folder (one transaction), refresh, publish; exit 2 for an
    unknown drop."""
    from .runs import remove_drop

    with progress.showing(True):
        removed = remove_drop(PulseHome.from_env(), args.name, say=_say)
    rows = sum(removed.raw_rows.values())
    by_table = ", ".join(f"{n} {t}" for t, n in removed.raw_rows.items() if n) or "no rows"
    print(f"removed drop {removed.drop}: {rows} raw rows ({by_table})")
    if removed.nul_id_rows:
        swept = ", ".join(f"{n} {t}" for t, n in removed.nul_id_rows.items())
        print(f"and the rows an earlier PULSE stored with a NUL in their session id: {swept}")
    print(f"its folder {removed.folder} was removed" if removed.folder else "it had no folder in the drop folder")
    return 0


def cmd_materialize(args: argparse.Namespace) -> int:
    from .runs import materialize

    home = PulseHome.from_env()
    with progress.showing(not args.json):
        done = materialize(home, args.select, say=_say)
    if args.json:
        published = {"published": done.not_published is None, "not_published": done.not_published}
        print(json.dumps({"assets": done.keys, "warehouse": str(home.warehouse), **published}, indent=2))
    else:
        print(materialized_line(home, len(done.keys), done.not_published))
        print("\n".join(home.settings_lines()))
    return 0


def materialized_line(home: PulseHome, assets: int, not_published: str | None) -> str:
    """The last line of ``pulse materialize``: where the results are, or why analysts do not see them and what to
    run (a selection on a home without drops materializes empty tables and publishes nothing)."""
    from .ingest.drop import list_drops

    if not_published is None:
        return f"materialized {assets} assets; published {home.warehouse}"
    kept = "the previous copy is kept" if home.warehouse.exists() else "nothing is published yet"
    if not home.drops.is_dir() or not list_drops(home.drops):
        return (
            f"materialized {assets} assets over no drop, so {home.warehouse} was not replaced ({kept}): run"
            " `pulse ingest PATH` (your trajectories) or `pulse demo` first"
        )
    return (
        f"materialized {assets} assets in the working database; {home.warehouse} not replaced ({kept}):"
        f" {not_published}; run `pulse materialize` (every asset) to bring every table up to date and publish"
    )


def cmd_synth(args: argparse.Namespace) -> int:
    from dataclasses import asdict

    from .synth import write_corpus

    started = time.perf_counter()
    with progress.showing(not args.json), progress.bar("sessions", unit="session") as advance:
        s = write_corpus(
            Path(args.out),
            args.sessions,
            seed=args.seed,
            n_users=args.users,
            scenario=args.scenario,
            advance=advance,
            prefix=args.prefix,
        )
    if args.json:
        print(json.dumps(asdict(s), indent=2, default=str))  # paths as text
        return 0
    print(
        f"wrote {s.n_sessions} sessions of {s.n_users} users ({s.n_rated} rated, {s.n_events} events, "
        f"{s.bytes_written / 1e6:.1f} MB) to {s.out_dir} in {time.perf_counter() - started:.1f} s"
    )
    print(f"ids: sessions {s.prefix}-s..., users {s.user_prefix}-u... (a corpus of other options gets other ids)")
    print(f"ground truth: {Path(s.out_dir) / '_truth.json'}")
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from .demo_summary import print_demo_summary
    from .ingest.register import register_drop
    from .runs import drop_summary, materialize
    from .settings import feature_settings
    from .synth.demo import DEMO_VALIDATION, demo_notes, install_human_labels, write_demo_corpus

    home = PulseHome.from_env().ensure()
    drop = home.root / "demo" / f"demo-{args.sessions}-seed{args.seed}"
    if not (drop / "_truth.json").exists():
        _say(f"synthesizing {args.sessions} sessions into {drop}")
        with progress.showing(True), progress.bar("sessions", unit="session") as advance:
            write_demo_corpus(drop, args.sessions, seed=args.seed, advance=advance)
    labels = install_human_labels(drop, home.root / HUMAN_LABELS)
    key, _ = register_drop(home, drop)
    with progress.showing(True):
        materialize(home, say=_say)
        validation = {"estimates__coverage_validation": DEMO_VALIDATION}
        materialize(home, "key:estimates/coverage_validation", say=_say, op_config=validation)
    summary = drop_summary(home, key)
    print(
        f"\nPULSE demo: {summary.sessions} sessions, {summary.segments} work segments, {summary.ratings} ratings,"
        f" {summary.asks} asks ({summary.quarantined} quarantined: the demo's deliberately broken records) in drop"
        f" {summary.drop}"
    )
    print(f"warehouse (open it with duckdb or `pulse sql`): {home.warehouse}")
    print(f"ground truth of the synthetic corpus: {drop / '_truth.json'}")
    for line in [*home.settings_lines(), labels, *demo_notes(feature_settings().llm_model is not None)]:
        print(line)
    print_demo_summary(home, opened=lambda: _open_published(home))
    return 0


def cmd_validate(args: argparse.Namespace) -> int:
    from .runs import materialize

    home = PulseHome.from_env()
    from .studies.coverage import DEFAULT_SCENARIOS, SCENARIOS

    scenarios = [s.strip() for s in args.scenarios.split(",") if s.strip()] if args.scenarios else []
    unknown = [s for s in scenarios if s not in SCENARIOS]
    if unknown:
        raise UsageError(f"unknown scenario(s) {', '.join(unknown)}; choose from {', '.join(SCENARIOS)}")
    scenarios = scenarios or list(DEFAULT_SCENARIOS)
    _say(
        f"coverage validation of {', '.join(scenarios)}: {args.replications} replications per scenario on "
        f"{args.workers} processes"
    )
    config = {"replications": args.replications, "seed": args.seed, "workers": args.workers, "scenarios": scenarios}
    with progress.showing(not args.json):
        materialize(
            home, "key:estimates/coverage_validation", say=_say, op_config={"estimates__coverage_validation": config}
        )

    from .demo_summary import show_query
    from .studies.coverage import check_targets

    with _open_published(home) as con:
        coverage = con.sql(f"SELECT * FROM {tables.COVERAGE_VALIDATION.qualified}").pl()
    unmet = check_targets(coverage, scenarios)
    if args.json:
        print(json.dumps({"coverage": coverage.to_dicts(), "targets_unmet": unmet}, indent=2))
        return 1 if unmet else 0
    show_query(
        lambda: _open_published(home),
        "Coverage of 95 % intervals over replications with a known effect:",
        f"""
        SELECT scenario, method, printf('%.3f', coverage) AS coverage, printf('%.4f', mean_width) AS mean_width,
               printf('%+.4f', bias) AS bias, replications, printf('%.2f', share_flagged) AS share_flagged
        FROM {tables.COVERAGE_VALIDATION.qualified} ORDER BY scenario, method""",
    )
    if unmet:
        print("targets NOT met:\n  " + "\n  ".join(unmet))
        return 1
    print("every coverage target met (see studies/coverage.py for the targets)")
    return 0


def cmd_power(args: argparse.Namespace) -> int:
    """Plan a test before it runs: what effect can n ratings and N unrated sessions per arm detect? With
    ``--experiments``: each experiment's share of asks per stratum that minimises the width (Neyman), from the
    published warehouse."""
    if args.experiments:
        return _power_experiments()
    if args.n is None or args.sd is None:
        raise UsageError("give --n and --sd (planning a test), or --experiments (the running experiments' strata)")
    from .stats import power as pw

    common = {"alpha": args.alpha, "power": args.power}
    naive = pw.minimum_detectable_effect(args.n, args.n, args.sd, **common)
    ppi = pw.minimum_detectable_effect(
        args.n, args.n, args.sd, N_treatment=args.N, N_control=args.N, rho=args.rho, **common
    )
    print(
        f"per arm: {args.n} ratings, {args.N} unrated sessions; label sd {args.sd:g}; prediction-label rho {args.rho:g}"
    )
    print(f"minimum detectable effect ({args.power:.0%} power, two-sided alpha {args.alpha:g}):")
    print(f"  naive (ratings only)   {naive:.4f}")
    print(
        f"  PPI (ratings + model)  {ppi:.4f}   ({ppi / naive:.0%} of naive; assumes rated sessions are representative)"
    )
    if args.effect is not None:
        share = args.n / (args.n + args.N) if args.n + args.N else 1.0
        need_naive = pw.labels_per_arm_needed(args.effect, args.sd, **common)
        need_ppi = pw.labels_per_arm_at_rated_share(args.effect, args.sd, share, rho=args.rho, **common)
        print(f"ratings per arm to detect {args.effect:g} (rated share {share:.1%} kept as traffic grows):")
        print(f"  naive {need_naive}   PPI {need_ppi}")
    return 0


def _power_experiments() -> int:
    """``pulse power --experiments``: ``estimates.ask_allocation`` of the published warehouse."""
    from .demo_summary import show_query

    home = PulseHome.from_env()
    if not home.warehouse.is_file():
        _say(f"pulse power: no published warehouse at {home.warehouse}: run pulse demo or pulse ingest first")
        return 1
    show_query(
        lambda: _open_published(home),
        "Where to ask, per experiment: the share of asks per stratum that minimises the width (Neyman, on the"
        " rectifier's spread and the answer rate) against asking everyone alike, and the ratings it saves:",
        f"""
        SELECT experiment, strata_column || coalesce('=' || stratum, '') AS stratum, sessions, rated,
               printf('%.3f', residual_sd) AS residual_sd, printf('%.2f', answer_rate) AS answer_rate,
               printf('%.1f%%', 100 * share_uniform) AS asks_uniform,
               printf('%.1f%%', 100 * share_neyman) AS asks_neyman,
               printf('%.1f%%', 100 * ratings_saved) AS ratings_saved, printf('%.1f%%', 100 * asks_saved) AS asks_saved,
               ratings_per_arm_uniform AS per_arm_uniform, ratings_per_arm_neyman AS per_arm_neyman,
               coalesce(note, '') AS note
        FROM {tables.ASK_ALLOCATION.qualified} ORDER BY experiment, stratum""",
    )
    return 0


def cmd_ask(args: argparse.Namespace) -> int:
    """Fit the ask policy on the published warehouse and write ask_policy.json and ask_policy.py for the platform."""
    from pathlib import Path

    import duckdb

    from .estimates.ask_policy import (
        DEFAULT_FLOOR,
        POLICY_DIR,
        policy_frame,
        policy_from_warehouse,
        policy_strata_column,
        write_policy,
    )
    from .settings import ask_budget

    floor = DEFAULT_FLOOR if args.floor is None else args.floor  # its range is checked by _check_arguments
    budget = args.budget if args.budget is not None else ask_budget()  # --budget wins over PULSE_ASK_BUDGET
    home = PulseHome.from_env()
    if not home.warehouse.is_file():
        _say(f"pulse ask: no published warehouse at {home.warehouse}: run pulse demo or pulse ingest first")
        return 1
    with _open_published(home) as con:
        try:
            column = policy_strata_column(home.experiments_file.path)
            policy, why_not = policy_from_warehouse(con, budget, floor, column)
        except duckdb.CatalogException as error:
            policy, why_not = None, f"the warehouse has no features or labels yet ({error})"
    if policy is None:
        _say(f"pulse ask: no ask policy: {why_not}")
        return 1
    out = Path(args.out) if args.out else home.root / POLICY_DIR
    json_path, py_path = write_policy(policy, out)
    print(policy_frame(policy).select("model", "term", "transform", "mean", "sd", "coefficient"))
    ratings = policy.expected_ratings_per_day
    print(
        f"budget {policy.budget_per_day:.1f} asks a day of {policy.sessions_per_day:.1f} sessions; the policy expects"
        f" {policy.expected_asks_per_day:.1f}"
        + (f" and {ratings:.1f} ratings" if ratings is not None else "")
        + f" (floor {policy.floor:g}; fitted on {policy.fitted_on_ratings} ratings"
        + (f" and {policy.answer.fitted_on_asks} asks" if policy.answer is not None else "")
        + f"); asks by {policy.form}; policy_version {policy.version}"
    )
    if policy.note:
        print(f"note: {policy.note}")
    print(f"wrote {json_path} and {py_path} (standard library only: from ask_policy import ask_probability)")
    return 0


def cmd_sql(args: argparse.Namespace) -> int:
    import duckdb

    home = PulseHome.from_env()
    if not home.warehouse.exists():
        raise UsageError(f"no warehouse at {home.warehouse} yet: run `pulse ingest PATH` or `pulse demo` first")
    con = _open_published(home)
    try:
        rel = con.sql(args.query)
        if rel is not None:
            if args.csv:
                rel.write_csv("/dev/stdout")
            else:
                rel.show(max_rows=args.max_rows, max_width=200)
    except duckdb.Error as e:  # a typo in the query is the user's to fix: say what DuckDB said, no traceback
        raise UsageError(f"query failed: {e}") from None
    finally:
        con.close()
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    """Rebuild PULSE_HOME/report/index.html from the published warehouse, without running the pipeline."""
    from .report.build import report_from_warehouse

    home = PulseHome.from_env()
    report = report_from_warehouse(home.warehouse, home.report, opened=lambda: _open_published(home))
    print(report.path)
    return 0


def cmd_publish(args: argparse.Namespace) -> int:
    """Publish PULSE_HOME/pulse.duckdb again from the tables, if they are whole (``runs.publish``)."""
    from .runs import publish

    home = PulseHome.from_env()
    reason = publish(home)
    if reason:
        raise RuntimeError(f"{home.warehouse} not replaced: {reason}")
    print(f"published {home.warehouse}")
    return 0


def cmd_diff(args: argparse.Namespace) -> int:
    from .warehouse_diff import diff_warehouses

    for path in (args.first, args.second):
        if not Path(path).is_file():
            raise FileNotFoundError(f"no warehouse at {path}")
    diffs = diff_warehouses(Path(args.first), Path(args.second), digits=args.digits, ignore=args.ignore)
    for d in diffs:
        print(d)
    alone = [d for d in diffs if d.only_in_one]
    if not diffs:
        print("every table is the same")
    elif len(alone) == len(diffs):  # a refactoring that added tables: what both hold is unchanged
        print(f"every table is the same apart from {len(alone)} table(s) in one warehouse only")
    else:
        print(f"{len(diffs)} table(s) differ")
    return 1 if diffs else 0


def cmd_ui(args: argparse.Namespace) -> int:
    """`dg dev` (webserver, daemon, code servers, their runs) as one process group that stops with this command.

    SIGINT (Ctrl-C) or SIGTERM goes to the whole group, which gets ``processes.STOP_GRACE_SECONDS`` before it is
    killed; the exit code is then 130 or 143. Every child runs from the environment this Python belongs to, as if
    it were activated (``processes.ui_command``, ``processes.environment_of``)."""
    from .processes import environment_of, run_process_group, ui_command

    home = PulseHome.from_env().ensure()
    env = environment_of({**os.environ, "DAGSTER_HOME": str(home.dagster_home), "PULSE_HOME": str(home.root)})
    _say(f"Dagster UI on http://{args.host}:{args.port} (DAGSTER_HOME={home.dagster_home}); Ctrl-C stops it")
    return run_process_group(ui_command(port=args.port, host=args.host), cwd=PROJECT_ROOT, env=env)


def cmd_serve(args: argparse.Namespace) -> int:
    """The rating service (``serve/``) until SIGINT or SIGTERM; exit 0 after its last roll."""
    from .serve.server import is_loopback, serve
    from .settings import SERVE_TOKENS, serve_settings

    settings = serve_settings()
    if settings.tokens is None and not is_loopback(args.host):
        raise UsageError(
            f"--host {args.host} without {SERVE_TOKENS} would let anyone on the network write ratings: set"
            f" {SERVE_TOKENS} to a file of tokens, or serve on 127.0.0.1"
        )
    home = PulseHome.from_env()
    return serve(home.root, settings, args.host, args.port, args.public_url, _say)


def cmd_pull(args: argparse.Namespace) -> int:
    """Pull Langfuse's observations and scores into a drop (``pull/langfuse.py``); one line says what came."""
    from .pull.langfuse import pull_langfuse
    from .settings import langfuse_settings

    home = PulseHome.from_env()
    report = pull_langfuse(
        home.work_db.parent,
        home.drops,
        langfuse_settings(),
        page_size=args.page_size,
        max_pages=args.max_pages,
        say=_say,
    )
    print(report.line())
    if report.drop is None:
        return 0
    if args.no_ingest:
        print(f"the drop sensor loads it under `pulse ui`; or run `pulse ingest {report.drop.path}`")
        return 0
    from .runs import ingest  # the drop is in the drop folder already: this runs it as `pulse ingest` would

    with progress.showing(True):
        summary = ingest(home, report.drop.path, say=_say)
    _print_drop_summary(summary)
    return 0 if summary.reconciled else 1


def cmd_discover(args: argparse.Namespace) -> int:
    """Feature discovery (Appendix A.2): an LLM proposes rubric features; each is annotated and its rho gain shown."""
    from .settings import feature_settings

    if not feature_settings().llm_model:
        _say(
            "pulse discover: needs an LLM: set PULSE_LLM_MODEL (a litellm model name, e.g. openai/gpt-5-mini), and"
            " PULSE_LLM_API_BASE / PULSE_LLM_API_KEY for its server (docs/features.md: the llm annotator)"
        )
        return 2
    from .connections import connect, exists
    from .discovery.discover import WIDE_FAMILIES, default_family, discover, gain_table
    from .features.rubric import load_rubric
    from .settings import llm_settings, modeling_settings
    from .warehouse import Warehouse

    home = PulseHome.from_env()
    if not exists(home.work_db):
        raise UsageError(f"no warehouse in {home.root} yet: run `pulse ingest PATH` first")
    if args.family and args.family not in WIDE_FAMILIES:
        raise ValueError(f"--family {args.family!r}: choose one of {', '.join(WIDE_FAMILIES)}")
    out = Path(args.out) if args.out else home.root / "discover" / "candidate_rubric.toml"
    seeds = tuple(42 + i for i in range(modeling_settings().cv_seeds))
    con = connect(home.work_db)
    try:
        wh = Warehouse(con)
        family = args.family or default_family(wh)
        found = discover(
            wh, llm_settings(), load_rubric(feature_settings().rubric_path), out, family, args.sample, seeds, _say
        )
    finally:
        con.close()
    print(f"candidate rubric: {found.rubric_path}")
    print(f"out-of-fold rho of {found.family}, current features vs current + each candidate:")
    print(gain_table(found.gains))
    print(f"gains (JSON): {found.gains_path}")
    print(f"LLM: {found.totals.calls} requests, {found.totals.cache_hits} cache hits, ${found.totals.cost_usd:.4f}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="pulse", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)

    s = sub.add_parser("ingest", help="register a file or folder as a drop and materialize it")
    s.add_argument("path")
    s.add_argument("--name", help="drop name in the drop folder (default: the file or folder name)")
    s.add_argument("--json", action="store_true", help="print the summary as JSON (and draw no bars)")
    s.add_argument("--strict", action="store_true", help="exit 1 when any record of the drop was quarantined")
    s.set_defaults(func=cmd_ingest)

    s = sub.add_parser("quarantine", help="the records PULSE could not accept, by reason (published warehouse)")
    s.add_argument("--drop", help="only this drop (its key, as `pulse ingest` printed it)")
    s.add_argument("--json", action="store_true", help="print the reasons as JSON")
    s.set_defaults(func=cmd_quarantine)

    s = sub.add_parser("drop", help="list the drops, or remove one (its rows everywhere, its folder)")
    drop_sub = s.add_subparsers(dest="drop_command", required=True)
    d = drop_sub.add_parser("ls", help="every drop: fingerprint, loaded at, sessions, quarantined, state")
    d.add_argument("--json", action="store_true", help="print the drops as JSON")
    d.set_defaults(func=cmd_drop_ls)
    d = drop_sub.add_parser("rm", help="remove a drop's rows from every table and its folder, then refresh and publish")
    d.add_argument("name", help="the drop's key, as `pulse ingest` and `pulse drop ls` print it")
    d.set_defaults(func=cmd_drop_rm)

    s = sub.add_parser("materialize", help="materialize every asset (or a selection) over all drops")
    s.add_argument("--select", help="Dagster asset selection, e.g. 'group:staging' or 'key:staging/sessions'")
    s.add_argument("--json", action="store_true", help="print the assets materialized as JSON (and draw no bars)")
    s.set_defaults(func=cmd_materialize)

    s = sub.add_parser("synth", help="write a synthetic OpenHands corpus with known ground truth")
    s.add_argument("--sessions", type=int, required=True)
    s.add_argument("--out", required=True)
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--users", type=int, default=None, help="default: sessions * 15000 / 36000")
    s.add_argument(
        "--scenario",
        choices=["self_selected", "random"],
        default="self_selected",
        help="who rates: chattier users more often (the paper's finding), or at random",
    )
    s.add_argument(
        "--prefix",
        default=None,
        help="start of every session, rating and user id (default: a digest of the other options, so two different"
        " corpora never share an id and the same command writes the same files); give two corpora the same prefix"
        " to make the later one replace the earlier one's sessions",
    )
    s.add_argument("--json", action="store_true", help="print the summary as JSON (and draw no bars)")
    s.set_defaults(func=cmd_synth)

    s = sub.add_parser("demo", help="synthesize a corpus, ingest it and materialize everything")
    s.add_argument("--sessions", type=int, default=4000)  # synth.demo.DEMO_SESSIONS
    s.add_argument("--seed", type=int, default=0)
    s.set_defaults(func=cmd_demo)

    s = sub.add_parser("validate", help="coverage of every estimator over replications with a known effect")
    s.add_argument("--replications", type=int, default=500, help="per scenario (default 500)")
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--workers", type=int, default=2)
    s.add_argument(
        "--scenarios",
        help="comma-separated: random, self_selected, user_assigned, user_features, peeking, active, active_varying,"
        " active_answer, drift, drift_stationary, stratified_differ, stratified_same, allocation_neyman,"
        " guardrail_users, guardrail_cuped, guardrail_margin (default: all)",
    )
    s.add_argument("--json", action="store_true", help="print coverage and unmet targets as JSON (and draw no bars)")
    s.set_defaults(func=cmd_validate)

    s = sub.add_parser("power", help="minimum detectable effect and ratings needed, for planning a test")
    s.add_argument("--n", type=int, default=None, help="ratings per arm (required unless --experiments)")
    s.add_argument("--N", type=int, default=0, help="unrated sessions per arm (default 0: naive only)")
    s.add_argument("--rho", type=float, default=0.0, help="correlation of predictions and ratings (out of fold)")
    s.add_argument(
        "--sd", type=float, default=None, help="sd of the label (e.g. ~0.25 on the 0-1 scale, ~1 star; with --n)"
    )
    s.add_argument("--effect", type=float, default=None, help="target effect, in the label's units")
    s.add_argument("--alpha", type=float, default=0.05)
    s.add_argument("--power", type=float, default=0.8)
    s.add_argument(
        "--experiments",
        action="store_true",
        help="instead: each experiment's share of asks per stratum that minimises the width, and the ratings it"
        " saves against asking everyone alike (from the ask allocation table of PULSE_HOME's published warehouse)",
    )
    s.set_defaults(func=cmd_power)

    s = sub.add_parser("ask", help="fit the ask policy (where to show the rating widget) and export it")
    s.add_argument("--budget", type=float, default=None, help="asks per day (default: PULSE_ASK_BUDGET, else today's)")
    s.add_argument("--floor", type=float, default=None, help="lowest ask probability (default 0.01)")
    s.add_argument("--out", default=None, help="folder for the two files (default PULSE_HOME/ask_policy)")
    s.set_defaults(func=cmd_ask)

    s = sub.add_parser("sql", help="query the published warehouse (read-only)")
    s.add_argument("query")
    s.add_argument("--csv", action="store_true")
    s.add_argument("--max-rows", type=int, default=40)
    s.set_defaults(func=cmd_sql)

    s = sub.add_parser("report", help="rebuild the HTML report (PULSE_HOME/report/index.html) from the warehouse")
    s.set_defaults(func=cmd_report)

    s = sub.add_parser("publish", help="publish pulse.duckdb again from the tables (after moving or copying a home)")
    s.set_defaults(func=cmd_publish)

    s = sub.add_parser("diff", help="compare two warehouses table for table (exit 1 when any table differs)")
    s.add_argument("first")
    s.add_argument("second")
    s.add_argument("--digits", type=int, default=10, help="significant digits doubles must share (default 10)")
    s.add_argument(
        "--ignore", action="append", default=[], metavar="SCHEMA.TABLE.COLUMN", help="a column not to compare"
    )
    s.set_defaults(func=cmd_diff)

    s = sub.add_parser("pull", help="pull traces and scores from Langfuse's API into a drop (PULSE_LANGFUSE_*)")
    s.add_argument("source", choices=["langfuse"], help="where from (docs/sources/langfuse-pull.md)")
    s.add_argument("--page-size", type=int, help="rows a page (default and most: 1000 observations, 100 scores)")
    s.add_argument("--max-pages", type=int, help="pages of each endpoint at most; the next pull resumes")
    s.add_argument("--no-ingest", action="store_true", help="only write the drop (the drop sensor loads it later)")
    s.set_defaults(func=cmd_pull)

    s = sub.add_parser("discover", help="an LLM proposes rubric features; each is annotated and its rho gain shown")
    s.add_argument("--sample", type=int, default=20, help="rated sessions shown: half highest, half lowest rated")
    s.add_argument("--out", help="candidate rubric TOML (default PULSE_HOME/discover/candidate_rubric.toml)")
    s.add_argument("--family", help="model family measured (default: the chosen one, else random_forest)")
    s.set_defaults(func=cmd_discover)

    s = sub.add_parser("hook", help="run by an agent (Claude Code, Codex, OpenHands): ask for ratings, forward them")
    hook_arguments(s)  # listed for help and the docs; `main` runs `hook` before parsing: it must never exit 2

    s = sub.add_parser("ui", help="open the Dagster UI (dg dev) on PULSE_HOME")
    s.add_argument("--port", type=int, default=3000)
    s.add_argument("--host", default="127.0.0.1", help="address the webserver listens on (0.0.0.0: every interface)")
    s.set_defaults(func=cmd_ui)

    s = sub.add_parser("serve", help="the rating service: agents ask it whom to ask and send it ratings (drops)")
    s.add_argument("--host", default="127.0.0.1", help="address to listen on (another than loopback needs tokens)")
    s.add_argument("--port", type=int, default=8765)
    s.add_argument("--public-url", default=None, help="base of the /rate links users open (default http://HOST:PORT)")
    s.set_defaults(func=cmd_serve)
    return p


# --- before any work: arguments, PULSE_HOME and settings files, checked without importing Dagster ---------------

READS_SETTINGS = frozenset({"ingest", "materialize", "demo", "validate", "ui", "discover", "drop", "serve"})
"""Commands that run stages, so read the settings files and ``PULSE_*`` variables: each is checked first
(``preflight.check_settings``), before a drop is copied or a model fitted. ``serve`` too: it writes drops the
stages will read under these settings, so a home whose pipeline cannot run should not start collecting."""
WRITES_HOME = frozenset(
    {"ingest", "materialize", "demo", "validate", "ui", "report", "discover", "publish", "drop", "serve", "pull"}
)
"""Commands that create or write files under PULSE_HOME: the home must be a folder this user can write."""
HOME_FREE = frozenset({"power", "synth", "diff", "hook"})
"""Commands that never read PULSE_HOME (the walking test, ``tests/test_cli_errors.py``, expects every other command
to refuse a broken home)."""
SHORT_MESSAGE_LINES = 4  # a message of more lines shows its first on the terminal, the whole in a log file
INTERNAL_ERROR = 70  # EX_SOFTWARE: a bug in PULSE, not the user's input (which exits 2)


class UsageError(ValueError):
    """Bad input the user can fix; ``main`` prints it as ``pulse <command>: <message>`` and exits 2."""


def _at_least(args: argparse.Namespace, option: str, low: float) -> None:
    value = getattr(args, option.lstrip("-").replace("-", "_"), None)
    if value is not None and not value >= low:  # not >=: NaN is refused too
        raise UsageError(f"{option} must be at least {low:g}, got {value:g}")


def _check_arguments(args: argparse.Namespace) -> None:
    """What can be checked from the arguments alone: paths that must exist, numbers in range (no heavy import,
    so ``pulse ingest /nonexistent`` answers at once instead of after Dagster loads)."""
    command = args.command
    if command == "ingest" and not os.path.lexists(args.path):
        raise UsageError(f"{args.path} does not exist (give a file or folder of trajectories)")
    if command == "ingest":  # before anything is copied: the name is one entry of the drop folder
        from .ingest.drop_names import DEFAULT_NAME, aider_drop_name, why_bad_drop_name

        named = args.name is not None
        given = Path(args.path).resolve()
        name = args.name if named else aider_drop_name(given) or given.name
        if problem := why_bad_drop_name(name, "--name" if named else DEFAULT_NAME):
            raise UsageError(problem)
    if command == "diff":
        for path in (args.first, args.second):
            if not Path(path).is_file():
                raise UsageError(f"no warehouse at {path}")
        _at_least(args, "--digits", 1)
    for option, low in {
        "synth": (("--sessions", 1), ("--users", 1), ("--seed", 0)),
        "demo": (("--sessions", 1), ("--seed", 0)),
        "validate": (("--replications", 1), ("--workers", 1), ("--seed", 0)),
        "sql": (("--max-rows", 1),),
        "discover": (("--sample", 2),),
        "ui": (("--port", 1),),
        "serve": (("--port", 1),),
        "ask": (("--budget", 0),),
        "pull": (("--page-size", 1), ("--max-pages", 1)),
    }.get(command, ()):
        _at_least(args, option, low)
    if command == "synth" and Path(args.out).exists() and not Path(args.out).is_dir():
        raise UsageError(f"--out {args.out} is a file, not a folder")
    if command in ("ui", "serve") and args.port > 65535:
        raise UsageError(f"--port must be at most 65535, got {args.port}")
    if command == "serve" and args.public_url is not None:
        from urllib.parse import urlsplit

        parts = urlsplit(args.public_url)
        if parts.scheme not in ("http", "https") or not parts.netloc or parts.query or parts.fragment:
            raise UsageError(
                f"--public-url {args.public_url!r} is not an http(s) URL such as https://pulse.example.org"
            )
    if command == "pull" and args.page_size is not None and args.page_size > 1000:
        raise UsageError(f"--page-size must be at most 1000, got {args.page_size}")
    if command == "ask" and args.floor is not None and not 0 < args.floor <= 1:
        raise UsageError(f"--floor must be in (0, 1], got {args.floor:g}")


def _check_home(command: str) -> None:
    """PULSE_HOME is a folder (or can become one) that this user can write, for a command that writes it."""
    from .settings import home_root

    root = home_root()
    existing = root
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        what = "is a file" if existing == root else f"is under {existing}, which is a file"
        raise UsageError(f"PULSE_HOME={root} {what}, not a folder: point PULSE_HOME at a folder")
    if command in WRITES_HOME and not os.access(existing, os.W_OK | os.X_OK):
        raise UsageError(f"PULSE_HOME={root}: {existing} cannot be written by this user (permission denied)")


def preflight(args: argparse.Namespace) -> None:
    """Every check that needs no work done: arguments, PULSE_HOME, the settings files and ``PULSE_*`` variables
    of a command that reads them. Raises the first problem as one line; ``main`` prints it."""
    _check_arguments(args)
    if args.command not in HOME_FREE:
        _check_home(args.command)
    if args.command in READS_SETTINGS:
        from .preflight import check_settings

        check_settings(PulseHome.from_env())
    if args.command == "serve":  # its own settings (tokens, rolls): a bad one stops the service, not the pipeline
        from .settings import serve_settings

        serve_settings()


DISK_FULL = "No space left on device"
FREE_SPACE = "free space there, or point PULSE_HOME (or the command's output) at another disk"


def _os_error_line(exc: OSError) -> str | None:
    """One line for an error of the operating system that names its path (None when it names none): the path,
    what went wrong and, for a full disk or quota, what to free. ``shutil.Error`` (a ``copytree`` that failed)
    holds ``(source, target, why)`` triples and no path of its own: its first is said."""
    import errno
    import shutil

    if isinstance(exc, shutil.Error) and exc.args and isinstance(exc.args[0], list) and exc.args[0]:
        source, target, why = (list(exc.args[0][0]) + ["", "", ""])[:3]
        more = len(exc.args[0]) - 1
        line = f"{target}: copying {source} failed ({why})" + (f", and {more} more files" if more > 0 else "")
        if DISK_FULL in str(why) or "[Errno 28]" in str(why):
            line += f": the disk holding {target} is full: {FREE_SPACE}"
        return line
    if exc.filename is None or not exc.strerror:
        return None
    line = f"{exc.filename}: {exc.strerror}"
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        what = "is full" if exc.errno == errno.ENOSPC else "is over this user's quota"
        line += f": the disk holding {exc.filename} {what}: {FREE_SPACE}"
    return line


def _error_kind(exc: BaseException) -> str | None:
    """One line for an error PULSE knows to be about the input or the environment, else None (a bug).

    Known: the user's input and settings (``ValueError``: ``UsageError``, ``SettingsFileError``, ``SettingsError``,
    ``RubricError``, a selection, a TOML error; ``LookupError`` of a missing table), files and folders
    (``OSError``, said with its path), a run that failed (``RuntimeError`` from ``runs``), DuckDB's errors (a
    locked, corrupt or foreign database) and Dagster's invalid config. Each keeps its own first line."""
    if isinstance(exc, OSError) and (line := _os_error_line(exc)):
        return line
    known: tuple[type[BaseException], ...] = (ValueError, OSError, RuntimeError, LookupError)
    duckdb = sys.modules.get("duckdb")
    if duckdb is not None:
        known += (duckdb.Error,)
    dagster = sys.modules.get("dagster")
    if dagster is not None:
        known += (dagster.DagsterInvalidConfigError,)  # op config given on the command line
    if isinstance(exc, known):
        text = str(exc).strip() or type(exc).__name__
        if DISK_FULL in text and FREE_SPACE not in text:  # DuckDB's or a run's write to a full disk
            text += f" (a disk is full: {FREE_SPACE})"
        return text
    return None


def _log_traceback(command: str, exc: BaseException) -> Path:
    """Write the full traceback to PULSE_HOME/.work/logs (else the system's temporary folder) and return its path."""
    import tempfile
    import traceback
    from datetime import UTC, datetime

    name = f"pulse-{command}-{datetime.now(UTC):%Y%m%dT%H%M%S}-{os.getpid()}.log"
    text = "".join(traceback.format_exception(exc))
    for folder in (PulseHome.from_env().root / ".work" / "logs", Path(tempfile.gettempdir())):
        try:
            folder.mkdir(parents=True, exist_ok=True)
            (folder / name).write_text(f"pulse {' '.join(sys.argv[1:])}\n{text}", encoding="utf-8")
            return folder / name
        except OSError:
            continue
    return Path("(nowhere: no folder could be written)")


def main(argv: list[str] | None = None) -> int:
    """Run one command. Whatever goes wrong ends in ONE line on stderr, ``pulse <command>: ...``:

    - bad input or a bad environment (``_error_kind``): what is wrong and, where it knows, the file and the fix;
      exit 2;
    - anything else is a bug in PULSE: a line saying so and where the full traceback was written
      (``_log_traceback``); exit 70 (EX_SOFTWARE), so a script can tell "fix your input" from "report this".
    A message of a few lines (DuckDB's: the error, then the query with a caret) is joined with " | "; a longer one
    (a failed run's) keeps its first line on the terminal, the whole in the log.
    """
    import warnings

    # Dagster's Beta/Preview warnings speak to developers of PULSE, not to its users
    warnings.filterwarnings("ignore", message=r".* is currently in (beta|preview)")
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["hook"]:  # run by an agent: never exit 2 (hooks/cli.py says why), never import Dagster
        return hook_main(argv[1:])
    args = build_parser().parse_args(argv)
    try:
        preflight(args)
        return args.func(args)
    except KeyboardInterrupt:
        _say(f"pulse {args.command}: interrupted")
        return 130
    except Exception as exc:  # every error ends in one line; a bug's traceback goes to a log file
        message = _error_kind(exc)
        if message is None:
            log = _log_traceback(args.command, exc)
            what = (str(exc).strip().splitlines() or [""])[0]
            _say(
                f"pulse {args.command}: internal error (a bug in PULSE), {type(exc).__name__}: {what}; the full"
                f" traceback is in {log}, please report it with that file"
            )
            return INTERNAL_ERROR
        lines = [line.strip() for line in message.splitlines() if line.strip()]
        shown = " | ".join(lines) if len(lines) <= SHORT_MESSAGE_LINES else lines[0]
        if len(lines) > SHORT_MESSAGE_LINES:
            shown += f" (the whole message: {_log_traceback(args.command, exc)})"
        _say(f"pulse {args.command}: {shown}")
        return 2


if __name__ == "__main__":
    sys.exit(main())
