"""Small markdown tables for asset metadata (the Dagster UI renders them)."""

import polars as pl


def markdown_table(df: pl.DataFrame, max_rows: int = 10, max_cols: int = 14) -> str:
    shown = df.head(max_rows).select(df.columns[:max_cols])
    cells = [
        [("" if v is None else f"{v:.4g}" if isinstance(v, float) else str(v)) for v in row]
        for row in shown.iter_rows()
    ]
    lines = ["| " + " | ".join(shown.columns) + " |", "|" + "---|" * len(shown.columns)]
    lines += ["| " + " | ".join(c.replace("|", "\\|").replace("\n", " ")[:60] for c in row) + " |" for row in cells]
    if df.width > max_cols or df.height > max_rows:
        lines.append(f"\n({df.height} rows, {df.width} columns; first {shown.height} × {shown.width} shown)")
    return "\n".join(lines)
