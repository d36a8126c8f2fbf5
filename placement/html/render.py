"""The Jinja2 environment: templates from the package (placement/html/templates), autoescape on."""

from __future__ import annotations

from functools import cache

from markupsafe import Markup

from placement import __version__


@cache
def environment():
    import jinja2

    env = jinja2.Environment(loader=jinja2.PackageLoader("placement.html", "templates"), autoescape=True,
                             undefined=jinja2.StrictUndefined, trim_blocks=False, lstrip_blocks=False,
                             keep_trailing_newline=True)
    return env


def render(template: str, **context) -> str:
    """The page; `context` values are escaped unless they are `Markup` (our own SVG)."""
    return environment().get_template(template).render(version=__version__, **context)


def trusted_svg(text: str) -> Markup:
    """An SVG this package drew (matplotlib's output): inserted as markup, not escaped."""
    return Markup(text)
