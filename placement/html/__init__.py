"""`--report FILE.html`: one self-contained page per command (plan, audit, sweep).

Each page is rendered from a Jinja2 template (autoescaped, shipped in the wheel as package data) with charts as
inline SVG and no reference outside the file (no script, font or stylesheet to fetch), so it opens offline,
mails as one attachment and prints.  Every number on a page is formatted by the same functions as the
command's text output, from the same objects.  The core never sees click: each builder takes the command's
result objects and returns the page as a string, the same bytes for the same input.
"""

from placement.html.pages import audit_html, plan_html, sweep_html

__all__ = ["audit_html", "plan_html", "sweep_html"]
