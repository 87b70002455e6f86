"""The console page's files as shipped: offline, consistent, and accessible at the markup level.

What the browser test (tests/test_console_browser.py) cannot see on one run: a reference to a file the package
does not ship or to another site (the page must work offline), an element the script looks up that the HTML
lacks, a form field with no label, a button with no text.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser
from importlib import resources

import pytest

STATIC = resources.files("frontier.console").joinpath("static")
SCRIPT_IDS = re.compile(r"""(?:\$|setText|showResult)\("([A-Za-z0-9_-]+)"[,)]""")  # the script's lookups by id


class Markup(HTMLParser):
    """The ids, the references (src, href), the labels' targets, the form fields and the buttons of a page."""

    def __init__(self) -> None:
        super().__init__()
        self.ids: set[str] = set()
        self.refs: list[str] = []
        self.label_for: set[str] = set()
        self.fields: list[dict[str, str | None]] = []
        self.buttons: list[str] = []
        self._button: list[str] | None = None
        self._label_depth = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if a.get("id"):
            self.ids.add(a["id"])
        for key in ("src", "href"):
            if a.get(key) is not None:
                self.refs.append(a[key])
        if tag == "label":
            self._label_depth += 1
            if a.get("for"):
                self.label_for.add(a["for"])
        if tag in ("input", "select", "textarea") and a.get("type") != "hidden":
            self.fields.append({**a, "wrapped": "yes" if self._label_depth else None})
        if tag == "button":
            self._button = [a.get("aria-label") or ""]

    def handle_endtag(self, tag: str) -> None:
        if tag == "label":
            self._label_depth -= 1
        if tag == "button" and self._button is not None:
            self.buttons.append("".join(self._button).strip())
            self._button = None

    def handle_data(self, data: str) -> None:
        if self._button is not None:
            self._button.append(data)


@pytest.fixture(scope="module")
def markup() -> Markup:
    parser = Markup()
    parser.feed(STATIC.joinpath("index.html").read_text(encoding="utf-8"))
    return parser


def test_the_page_refers_only_to_its_own_files(markup: Markup) -> None:
    shipped = {f.name for f in STATIC.iterdir()}
    for ref in markup.refs:
        if ref.startswith("data:"):
            continue
        assert not re.match(r"^[a-z]+:|^//", ref), f"the page fetches from elsewhere: {ref}"
        assert ref.startswith("static/") and ref.removeprefix("static/") in shipped, f"not shipped: {ref}"
    assert {"console.js", "console.css"} <= {r.removeprefix("static/") for r in markup.refs}


def test_the_script_fetches_nothing_from_elsewhere() -> None:
    script = STATIC.joinpath("console.js").read_text(encoding="utf-8")
    assert not re.search(r"""["'`](?:https?:)?//""", script), "an absolute URL in console.js"
    assert "document.cookie" not in script  # the token travels as a header only


def test_every_element_the_script_uses_is_in_the_page(markup: Markup) -> None:
    script = STATIC.joinpath("console.js").read_text(encoding="utf-8")
    used = set(SCRIPT_IDS.findall(script))
    assert used, "the pattern found no lookup"
    assert not used - markup.ids, f"looked up by console.js, missing from index.html: {sorted(used - markup.ids)}"


def test_every_field_has_a_label_and_every_button_a_name(markup: Markup) -> None:
    unlabelled = [f.get("id") or f for f in markup.fields if not f["wrapped"] and f.get("id") not in markup.label_for]
    assert not unlabelled, f"form fields without a label: {unlabelled}"
    assert markup.buttons and all(markup.buttons), f"a button without text: {markup.buttons}"
