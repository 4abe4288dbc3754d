"""The capacity-planning review: one self-contained HTML page about the fleet.

data.py gathers probe and utilisation reports (a directory, the service's store, or the service
over HTTP) into plain dataclasses; analysis.py is pure (inventory, fleet ratios, outliers);
costs.py prices savings and named jobs (the jobs through advisor.planning.estimate, as the CLI and
API do); svg.py draws the charts; html.py shapes the review for the Jinja2 templates in
templates/ (autoescape on) that make the page. No JavaScript, no external requests.
"""

from __future__ import annotations

from advisor.review.analysis import Review, build_review
from advisor.review.data import ReviewData, from_dir, from_server, from_store
from advisor.review.html import render_html

__all__ = [
    "Review",
    "ReviewData",
    "build_review",
    "from_dir",
    "from_server",
    "from_store",
    "render_html",
]
