"""The console page's files as shipped: offline, consistent, and accessible at the markup level.

What the browser test (tests/test_console_browser.py) cannot see on one run: a reference to a file the package
does not ship or to another site (the page must work offline), an element the script looks up that the HTML
lacks, a form field with no label, a button with no text, a vendored file that is not the release it names.
"""

from __future__ import annotations

import hashlib
import re
from html.parser import HTMLParser
from importlib import resources
from importlib.resources.abc import Traversable

import pytest

STATIC = resources.files("frontier.console").joinpath("static")
UPLOT_SCRIPT = "vendor/uplot/uPlot.iife.min.js"
UPLOT_PAGE_FILES = (UPLOT_SCRIPT, "vendor/uplot/uPlot.min.css")  # what the page loads
UPLOT_FILES = (*UPLOT_PAGE_FILES, "vendor/uplot/LICENSE")  # what the package ships of uPlot
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


def shipped_files(folder: Traversable = STATIC, prefix: str = "") -> set[str]:
    """The files under static/, as paths relative to it ("vendor/uplot/uPlot.min.css")."""
    files: set[str] = set()
    for entry in folder.iterdir():
        files |= shipped_files(entry, f"{prefix}{entry.name}/") if entry.is_dir() else {prefix + entry.name}
    return files


def test_the_page_refers_only_to_its_own_files(markup: Markup) -> None:
    shipped = shipped_files()
    for ref in markup.refs:
        if ref.startswith("data:"):
            continue
        assert not re.match(r"^[a-z]+:|^//", ref), f"the page fetches from elsewhere: {ref}"
        assert ref.startswith("static/") and ref.removeprefix("static/") in shipped, f"not shipped: {ref}"
    used = {r.removeprefix("static/") for r in markup.refs}
    assert {"console.js", "console.css", *UPLOT_PAGE_FILES} <= used, used
    assert set(UPLOT_FILES) <= shipped, shipped


@pytest.mark.parametrize("name", ["console.js", UPLOT_SCRIPT])
def test_the_scripts_fetch_nothing_from_elsewhere(name: str) -> None:
    script = STATIC.joinpath(*name.split("/")).read_text(encoding="utf-8")
    assert not re.search(r"""["'`](?:https?:)?//""", script), f"an absolute URL in {name}"
    assert "document.cookie" not in script  # the token travels as a header only


def test_the_vendored_uplot_is_the_release_its_readme_names() -> None:
    """The files are npm's uplot unmodified: their sha256 as the README records them beside the version and the
    tarball's integrity, the version the one in the script's banner, the licence MIT."""
    readme = STATIC.joinpath("vendor", "uplot", "README").read_text(encoding="utf-8")
    version = re.search(r"^version: (\d+\.\d+\.\d+)$", readme, re.M)[1]
    assert re.search(rf"^tarball: https://registry\.npmjs\.org/uplot/-/uplot-{re.escape(version)}\.tgz$", readme, re.M)
    assert re.search(r"^integrity: sha512-[A-Za-z0-9+/]{86}==$", readme, re.M), "no sha512 integrity in the README"
    recorded = dict((name, digest) for digest, name in re.findall(r"^([0-9a-f]{64})  (\S+)$", readme, re.M))
    assert set(recorded) == {name.rsplit("/", 1)[1] for name in UPLOT_FILES}, recorded
    for name, digest in recorded.items():
        data = STATIC.joinpath("vendor", "uplot", name).read_bytes()
        assert hashlib.sha256(data).hexdigest() == digest, f"vendor/uplot/{name} is not the file the README records"
    banner = STATIC.joinpath(*UPLOT_SCRIPT.split("/")).read_text(encoding="utf-8").splitlines()[0]
    assert f"(v{version})" in banner, banner
    assert STATIC.joinpath("vendor", "uplot", "LICENSE").read_text(encoding="utf-8").startswith("The MIT License")


def test_every_element_the_script_uses_is_in_the_page(markup: Markup) -> None:
    script = STATIC.joinpath("console.js").read_text(encoding="utf-8")
    used = set(SCRIPT_IDS.findall(script))
    assert used, "the pattern found no lookup"
    assert not used - markup.ids, f"looked up by console.js, missing from index.html: {sorted(used - markup.ids)}"


def test_every_field_has_a_label_and_every_button_a_name(markup: Markup) -> None:
    unlabelled = [f.get("id") or f for f in markup.fields if not f["wrapped"] and f.get("id") not in markup.label_for]
    assert not unlabelled, f"form fields without a label: {unlabelled}"
    assert markup.buttons and all(markup.buttons), f"a button without text: {markup.buttons}"
