"""Reading an HTML page in tests: every element with its attributes, and what a browser would fetch."""

from __future__ import annotations

import re
from html.parser import HTMLParser

# CSS that fetches: url(...) to anything but an in-page reference or a data: URI, and @import
CSS_FETCH = re.compile(r"""url\(\s*['"]?(?!\s*(?:#|data:))[^)]*\)|@import""", re.IGNORECASE)
FETCHING_ELEMENTS = ("script", "iframe", "frame", "object", "embed", "base", "link", "audio", "video", "source")
URL_ATTRIBUTES = ("src", "href", "xlink:href", "srcset", "poster", "data", "action", "background", "manifest")


class Page(HTMLParser):
    """Every element's tag and attributes, and the page's text (style blocks included)."""

    def __init__(self, text: str):
        super().__init__()
        self.elements: list[tuple[str, dict]] = []
        self.text: list[str] = []
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        self.elements.append((tag, {k: v or "" for k, v in attrs}))

    def handle_data(self, data):
        self.text.append(data)

    def ids(self) -> set[str]:
        return {a["id"] for _t, a in self.elements if "id" in a}

    def by_id(self, element_id: str) -> tuple[str, dict]:
        return next((t, a) for t, a in self.elements if a.get("id") == element_id)


def external_references(page: Page) -> list[str]:
    """What a browser would fetch for this page: attributes naming anything but a ``data:`` URI or an
    in-page anchor, elements that load or run something, and CSS ``url(...)``/``@import`` to elsewhere."""
    out = []
    for tag, attrs in page.elements:
        for key in URL_ATTRIBUTES:
            value = attrs.get(key, "").strip()
            if value and not value.startswith(("data:", "#")):
                out.append(f"<{tag} {key}={value}>")
        if tag in FETCHING_ELEMENTS:
            out.append(f"<{tag}>")
        out += [f"<{tag} {k}={v}>" for k, v in attrs.items() if CSS_FETCH.search(v)]
    out += [f"css: {m.group(0)}" for text in page.text for m in CSS_FETCH.finditer(text)]
    return out
