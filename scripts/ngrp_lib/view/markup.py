"""HTML templates that escape every value unless it is already markup.

A template is HTML with `{name}` fields (str.format syntax; literal braces doubled). Filling it escapes each
value with `html.escape(..., quote=True)`, so text from a run (prompts, responses, agent names, field
values) can never become markup, in element content or in a double-quoted attribute. Only a `Markup`
value, which a template rendering or `join` returns, goes in as it is. Templates live in `templates/`
beside this module (package data) and are read once.
"""

from __future__ import annotations

import functools
import html
import string
from collections.abc import Iterable, Mapping
from importlib import resources
from typing import Any


class Markup(str):
    """A string that is HTML already (a rendered template); never built from untrusted text directly."""

    __slots__ = ()

    def __add__(self, other: Any) -> Markup:  # markup + text escapes the text
        return Markup(str.__add__(self, escape(other)))

    def __radd__(self, other: Any) -> Markup:
        return Markup(str.__add__(escape(other), self))


def escape(value: Any) -> Markup:
    if isinstance(value, Markup):
        return value
    return Markup(html.escape("" if value is None else str(value), quote=True))


def join(parts: Iterable[Any], sep: str = "") -> Markup:
    """Markup made of parts, each escaped unless it is markup."""
    return Markup(sep.join(escape(p) for p in parts))


class _Escaping(string.Formatter):
    def format_field(self, value: Any, format_spec: str) -> str:
        if isinstance(value, Markup):
            return value
        return escape(format(value, format_spec) if format_spec else value)

    def convert_field(self, value: Any, conversion: str | None) -> Any:
        if conversion is not None:
            raise ValueError("templates take no !r / !s conversions: every field is escaped")
        return value


_FORMATTER = _Escaping()


class Template:
    def __init__(self, text: str, name: str = "<string>") -> None:
        self.text = text
        self.name = name

    def render(self, values: Mapping[str, Any] | None = None, /, **more: Any) -> Markup:
        return Markup(_FORMATTER.vformat(self.text, (), {**(values or {}), **more}))


@functools.cache
def template(name: str) -> Template:
    """`templates/<name>.html`, read once."""
    folder = resources.files(__package__).joinpath("templates")
    text = folder.joinpath(f"{name}.html").read_text(encoding="utf-8")
    return Template(text, name)


@functools.cache
def static_text(name: str) -> str:
    """A file of `static/` (CSS, JavaScript), for the viewer's /static route and the report's inline copy."""
    return resources.files(__package__).joinpath("static").joinpath(name).read_text(encoding="utf-8")


def render(name: str, values: Mapping[str, Any] | None = None, /, **more: Any) -> Markup:
    return template(name).render(values, **more)
