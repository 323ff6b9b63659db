"""The one report page of a run, evaluation or training: settings, tables, plots, notes and trajectories.

``report.html`` is a single static file: no server, no CDN, CSS and JavaScript inline, so it opens from
disk, attaches to an issue or a mail, and works offline. Plots are PNG files beside it. An eval
(``eval.report``) and a training run (``train.report``) fill the same ``ReportPage``::

    ReportPage(title, notes=[...], warnings=[...], tables={"heading": Table(...)}, settings=[...], images=["curve.png"],
               records=[{"question": ..., "trajectory": {...}, "f1": ...}, ...]).write(path)

Sections appear in that order (warnings, in a box, before the notes); any left empty is left out. ``records`` become the trajectory viewer
(``reports.trajectories``).
"""

from __future__ import annotations

import html
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from deepresearcher.reports.trajectories import VIEWER_CSS, viewer_html

__all__ = ["ReportPage", "Table"]

_CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0;background:#f6f7f9;color:#1d2430}
header{background:#1d2430;color:#fff;padding:14px 24px}header h1{margin:0;font-size:20px}
main{padding:16px 24px;max-width:1200px}h2{font-size:17px;margin:18px 0 6px}
table.metrics{border-collapse:collapse;background:#fff;margin:8px 0 4px}
table.metrics th,table.metrics td{border:1px solid #d6dae1;padding:4px 10px;text-align:right}
table.metrics th:first-child,table.metrics td:first-child{text-align:left}table.metrics tr.total td{font-weight:600}
.meta{color:#4a5566;font-size:13px;margin:4px 0 16px}.meta li{margin:1px 0}
.plots img{margin:4px;background:#fff;border:1px solid #d6dae1}
.warn{background:#fff4e5;border:1px solid #e8a33d;border-left:6px solid #d9822b;padding:8px 14px;margin:10px 0}
.warn h2{margin:2px 0 4px;color:#8a4b00}
"""


def _cell(value: Any) -> str:
    """A table cell as text: floats to three decimals, nothing as a dash."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "—"
    return f"{value:.3f}" if isinstance(value, float) else str(value)


@dataclass
class Table:
    """A table of text cells, written as Markdown (``report.md``, the terminal) and as HTML (the page).

    ``total`` is a summary row (an average) set apart from the rest: bold in both forms.
    """

    columns: list[str]
    rows: list[list[str]]
    total: list[str] | None = None

    @classmethod
    def from_records(cls, records: list[dict[str, Any]]) -> Table:
        """One row per dict, one column per key (in first-seen order)."""
        columns = list(dict.fromkeys(key for record in records for key in record))
        return cls(columns, [[_cell(record.get(key)) for key in columns] for record in records])

    def markdown(self) -> str:
        """The table in Markdown, text left-aligned and every other column right-aligned."""
        lines = ["| " + " | ".join(self.columns) + " |", "|---|" + "---:|" * (len(self.columns) - 1)]
        lines += ["| " + " | ".join(row) + " |" for row in self.rows]
        if self.total is not None:
            lines.append(f"| **{self.total[0]}** | " + " | ".join(self.total[1:]) + " |")
        return "\n".join(lines)

    def html(self) -> str:
        head = "".join(f"<th>{html.escape(c)}</th>" for c in self.columns)
        rows = [("", row) for row in self.rows] + ([(" class=total", self.total)] if self.total is not None else [])
        body = "".join(f"<tr{cls}>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for cls, row in rows)
        return f"<table class=metrics><tr>{head}</tr>{body}</table>"


def _inline(text: str) -> str:
    """Escaped text with Markdown's ``code`` spans as <code>: settings and notes read the same in both forms."""
    return re.sub(r"`([^`]*)`", r"<code>\1</code>", html.escape(text))


@dataclass
class ReportPage:
    """Everything a report page shows; ``html()`` renders it, ``write(path)`` saves it."""

    title: str
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)  # shown first, in a box: what the reader must not miss
    tables: dict[str, Table] = field(default_factory=dict)  # heading ("" for none) -> table
    settings: list[str] = field(default_factory=list)  # the settings behind the numbers, one line each
    images: list[str] = field(default_factory=list)  # PNG file names, relative to the page
    records: list[dict[str, Any]] = field(default_factory=list)  # scored rollouts with their trajectory
    group_label: str = "benchmark"  # what the viewer's groups are: benchmarks, or a run's stages
    doc_title: str = ""  # the browser tab's title; the title by default

    def html(self) -> str:
        parts = ["<div class=warn><h2>Warnings</h2><ul>" + "".join(f"<li>{_inline(w)}</li>" for w in self.warnings)
                 + "</ul></div>"] if self.warnings else []
        parts += [f"<p>{_inline(note)}</p>" for note in self.notes]
        for heading, table in self.tables.items():
            parts.append((f"<h2>{html.escape(heading)}</h2>" if heading else "") + table.html())
        if self.settings:
            parts.append("<h2>Settings</h2><ul class=meta>" + "".join(f"<li>{_inline(line)}</li>" for line in self.settings) + "</ul>")
        if self.images:
            parts.append("<h2>Curves</h2><div class=plots>" + "".join(
                f'<img src="{html.escape(name)}" alt="{html.escape(Path(name).stem)}">' for name in self.images) + "</div>")
        if self.records:
            parts.append("<h2>Trajectories</h2>" + viewer_html(self.records, self.group_label))
        title = html.escape(self.title)
        return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<title>{html.escape(self.doc_title or self.title)}</title><style>{_CSS}{VIEWER_CSS if self.records else ""}</style></head>
<body><header><h1>{title}</h1></header><main>
{chr(10).join(parts)}
</main></body></html>
"""

    def write(self, path: Path) -> Path:
        path.write_text(self.html(), encoding="utf-8")
        return path
