"""Report pages: the one writer of ``report.html`` for evaluations and training runs.

``ReportPage`` holds what a page shows (notes, tables, settings, plots, trajectories) and renders it;
``Table`` is written both as Markdown and HTML; ``trajectories`` is the embedded trajectory viewer.
The package imports nothing of ``eval`` or ``train``: both import it, never the other way round.
"""

from deepresearcher.reports.page import ReportPage, Table
from deepresearcher.reports.trajectories import OUTCOMES, outcome, slim_record

__all__ = ["OUTCOMES", "ReportPage", "Table", "outcome", "slim_record"]
