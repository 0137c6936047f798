"""HTML built so that text is always text (pure): every string is escaped where it enters a page, and only
markup this module built (Markup) passes through as it is. No template language: a page is a tree of calls.

Agent text (argv, script lines, task keys, env values, the requester, job names) is also made inert as the
terminal shows it (rsk.local.inert): a bidi override or a line break cannot reorder or forge what the human
reads. The Content-Security-Policy (rsk.ui.guard) is the second wall: no inline script or handler runs."""

from __future__ import annotations

import html
from collections.abc import Iterable

from rsk.local.inert import inert


class Markup(str):
    """HTML this module built: safe to insert as it is."""

    __slots__ = ()


VOID = {"br", "hr", "input", "meta", "link", "img"}


def esc(value: object) -> Markup:
    """Any value as text: Markup passes, everything else is escaped (quotes too)."""
    if isinstance(value, Markup):
        return value
    return Markup(html.escape(str(value), quote=True))


def agent(text: str) -> Markup:
    """Text an agent wrote: made inert (visible escapes for control and format characters), then escaped."""
    return esc(inert(text))


def _children(items: Iterable[object]) -> str:
    out: list[str] = []
    for item in items:
        if item is None or item is False:
            continue
        if isinstance(item, str | int | float):
            out.append(esc(item))
        else:
            out.append(_children(item))  # type: ignore[arg-type]
    return "".join(out)


def el(tag: str, attrs: dict[str, object] | None = None, *children: object) -> Markup:
    """<tag attrs>children</tag>; an attribute that is None or False is left out, True stands alone."""
    parts = [tag]
    for name, value in (attrs or {}).items():
        if value is None or value is False:
            continue
        key = name.rstrip("_").replace("_", "-")
        parts.append(key if value is True else f'{key}="{esc(value)}"')
    head = "<" + " ".join(parts) + ">"
    if tag in VOID:
        return Markup(head)
    return Markup(head + _children(children) + f"</{tag}>")


def join(items: Iterable[object]) -> Markup:
    return Markup(_children(items))


def document(title: str, body: Markup, nav: str = "", version: str = "") -> Markup:
    """A whole page: the stylesheet and script from /static (never inline), the navigation, the body."""
    links = [
        ("cards", "/", "Cards"),
        ("budgets", "/budgets", "Budgets"),
        ("board", "/board", "Board"),
        ("gpus", "/gpus", "GPUs"),
    ]
    menu = el(
        "nav",
        {},
        el("span", {"class": "brand"}, "rsk"),
        [el("a", {"href": href, "aria-current": "page" if key == nav else None}, label) for key, href, label in links],
    )
    return Markup(
        "<!doctype html>"
        + el(
            "html",
            {"lang": "en"},
            el(
                "head",
                {},
                el("meta", {"charset": "utf-8"}),
                el("meta", {"name": "viewport", "content": "width=device-width, initial-scale=1"}),
                el("meta", {"name": "color-scheme", "content": "light dark"}),
                el("title", {}, f"rsk: {title}"),
                el("link", {"rel": "stylesheet", "href": f"/static/ui.css?v={version}"}),
                el("link", {"rel": "icon", "href": f"/static/icon.svg?v={version}", "type": "image/svg+xml"}),
                el("script", {"src": f"/static/ui.js?v={version}", "defer": True}),
            ),
            el("body", {}, menu, el("main", {}, body)),
        )
    )
