"""HTML primitives for the report page: escaping, tables, embedded figures, the page itself.

`Html` marks text built here as HTML; every other value a primitive receives is escaped, so a
string read from an artifact (a provenance command, a finding's message, a file name) is shown
as text and never interpreted. The page loads nothing: its CSS is inline, its images are data
URIs, and its content policy forbids every other source.
"""

from __future__ import annotations

import base64
import html
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime

from tts_bench import __version__


class Html(str):
    """Text that is already HTML (built by this module); any other str is escaped."""

    __slots__ = ()


def esc(value: object) -> Html:
    """`value` as HTML: unchanged when it is `Html`, escaped text otherwise."""
    if isinstance(value, Html):
        return value
    return Html(html.escape(str(value), quote=True))


def join(parts: Iterable[object]) -> Html:
    return Html("".join(esc(p) for p in parts))


def tag(name: str, *content: object, cls: str | None = None, id_: str | None = None) -> Html:
    """`<name>` around escaped `content`; `cls` and `id_` are this module's own words."""
    attrs = (f' id="{esc(id_)}"' if id_ else "") + (f' class="{esc(cls)}"' if cls else "")
    return Html(f"<{name}{attrs}>{join(content)}</{name}>")


def number(value: float | int | None, spec: str = ".3g", unit: str = "") -> str:
    """A figure as text (`-` when absent); `unit` follows it after a thin space."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    return format(value, spec) + (f"\u2009{unit}" if unit else "")


def yes_no(value: bool | None) -> str:
    return "-" if value is None else ("yes" if value else "no")


def td(value: object) -> Html:
    """A cell; a `(text, cls)` pair gets that class (a verdict's colour, `hash` for a digest)."""
    if isinstance(value, tuple):
        text, cls = value
        return tag("td", text, cls=cls)
    return tag("td", value)


def table(
    headers: Sequence[str], rows: Iterable[Sequence[object]], caption: str | None = None
) -> Html:
    head = tag("tr", *(tag("th", h) for h in headers))
    body = [tag("tr", *(td(c) for c in row)) for row in rows]
    parts = [tag("caption", caption)] if caption else []
    return tag("table", *parts, tag("thead", head), tag("tbody", *body))


def key_values(pairs: Iterable[tuple[str, object]]) -> Html:
    """Two columns, name and value: an artifact's summary."""
    rows = [tag("tr", tag("th", k), td(v)) for k, v in pairs]
    return tag("table", tag("tbody", *rows), cls="kv")


def figure(png: bytes, alt: str, caption: str) -> Html:
    """A PNG embedded as a data URI (base64 holds no character HTML would read)."""
    data = base64.b64encode(png).decode("ascii")
    image = Html(f'<img src="data:image/png;base64,{data}" alt="{esc(alt)}">')
    return tag("figure", image, tag("figcaption", caption))


def note(text: object) -> Html:
    return tag("p", text, cls="note")


def pre(text: object) -> Html:
    return tag("pre", text)


def subsection(title: str, *parts: object, id_: str | None = None) -> Html:
    return tag("article", tag("h3", title), *parts, id_=id_)


CSS = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 0 auto; max-width: 1180px;
       padding: 1.5em 2em 4em; color: #1c2330; background: #fff; }
h1 { font-size: 1.6em; margin: 0 0 .2em; }
h2 { font-size: 1.3em; border-bottom: 2px solid #1f5fa8; padding-bottom: .2em; margin-top: 2em; }
h3 { font-size: 1.05em; margin: 1.4em 0 .5em; overflow-wrap: break-word; }
nav ul { display: flex; flex-wrap: wrap; gap: .4em 1.2em; list-style: none; padding: 0; }
table { border-collapse: collapse; margin: .6em 0 1em; font-size: 13px; }
caption { text-align: left; font-weight: 600; padding: .3em 0; }
th, td { border: 1px solid #d5dae3; padding: .25em .55em; text-align: left;
         vertical-align: top; overflow-wrap: break-word; }
td.hash { font: 11px/1.3 monospace; word-break: break-all; min-width: 14em; }
thead th { background: #eef2f8; }
table.kv th { background: #f6f8fb; font-weight: 600; white-space: nowrap; }
td.ok { background: #e3f4e8; } td.warn { background: #fff4d6; } td.stop { background: #fbe0dd; }
figure { margin: 1em 0; } figure img { max-width: 100%; border: 1px solid #d5dae3; }
figcaption { color: #4a5568; font-size: 12px; }
pre { background: #f6f8fb; border: 1px solid #d5dae3; padding: .8em; overflow-x: auto;
      font-size: 12px; white-space: pre-wrap; }
p.note { color: #4a5568; }
.meta { color: #4a5568; }
"""

# The page may load nothing: no script, no font, no image that is not a data URI.
CONTENT_POLICY = "default-src 'none'; img-src data:; style-src 'unsafe-inline'"


def page(title: str, intro: Html, sections: Sequence[tuple[str, str, Html]]) -> str:
    """The whole document: a heading, a table of contents and the sections (anchor, title,
    body), each an `<section id=anchor>`."""
    toc = tag("nav", tag("ul", *(tag("li", Html(f'<a href="#{a}">{esc(t)}</a>')) for a, t, _ in sections)))  # fmt: skip
    body = [tag("section", tag("h2", t), content, id_=a) for a, t, content in sections]
    made = datetime.now(UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")
    return (
        "<!doctype html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{CONTENT_POLICY}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{esc(title)}</title><style>{CSS}</style></head>\n<body>"
        f"{tag('h1', title)}{tag('p', f'tts-bench {__version__}, written {made}', cls='meta')}"
        f"{intro}{toc}{join(body)}</body></html>\n"
    )
