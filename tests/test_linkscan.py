"""workers._linkscan, the tokenizer pass that finds a page's links without a DOM, against lexbor's DOM.

The scanner answers a page or gives it back (None) to the full parser; where it answers, the page's links must
be lexbor's: the same links in the same order, the same first <base href>, the same <meta name>s, and values
decoded the same (workers.charrefs). The DOM alone holds clones of misnested <a> elements (the tree builder's
"reconstruct the active formatting elements"): they repeat an earlier link, so the links are the same, and
the scanner counts each tag as written once.
"""

from __future__ import annotations

import os
import random
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from selectolax.lexbor import LexborHTMLParser

import workers.links as links
from frontier.native import NO_NATIVE_ENV
from frontier.testing.htmlgen import random_page, random_table_page
from workers.charrefs import unescape_attribute
from workers.links import HrefCache, extract_links

scan = links.scanner()
pytestmark = pytest.mark.skipif(scan is None, reason="workers._linkscan is not built (no C compiler at install)")
PAGE = "http://example.com/dir/page.html"


def lexbor_found(text: str) -> links.Found:
    return links._from_tree(LexborHTMLParser(text).css(links._NODES_CSS))


def scanned(text: str) -> links.Found | None:
    found = scan(text)
    return None if found is None else links._unescaped(*found)


def same_page(text: str) -> None:
    """The scanner's answer for `text`, if it gives one, is lexbor's (clones aside, see the module docstring)."""
    got = scanned(text)
    if got is None:
        return
    want = lexbor_found(text)
    hrefs, rels, base, metas, count = got
    assert count == len(hrefs)
    assert base == want[2]
    assert [(n or "", c or "") for n, c in metas] == [(n or "", c or "") for n, c in want[3]]  # lexbor: None for <meta name>
    assert list(dict.fromkeys(hrefs)) == list(dict.fromkeys(want[0]))
    if len(hrefs) == len(want[0]):  # no clones: tag for tag
        assert hrefs == want[0]
        assert [r or None for r in (rels or [None] * len(hrefs))] == [r or None for r in (want[1] or [None] * len(hrefs))]


def without_scanner(fn):
    saved = links._built_scan
    links._built_scan = None
    try:
        return fn()
    finally:
        links._built_scan = saved


# -- what the tokenizer does, written out -----------------------------------------------------------------

EXAMPLES = [
    ('<a href=x>', ["x"]),
    ('<A HREF="X">', ["X"]),
    ("<a href='q' href=second>", ["q"]),  # a duplicate attribute is dropped
    ("<a/href=q>", ["q"]),
    ("<a href>", [""]),
    ("<a =href=x>", []),  # the attribute is named "=href"
    ('<a href="x\r\ny\rz">', ["x\ny\nz"]),
    ('<a href=x"y>', ['x"y']),
    ('<a href="a>b">', ["a>b"]),
    ('<a href="unterminated>', []),  # the file ends in the tag: no element
    ("<a href=eof", []),
    ("<!-- <a href=c> --><a href=d>", ["d"]),
    ("<!--> <a href=e>", ["e"]),
    ("<!---> <a href=f>", ["f"]),
    ("<!-- --!> <a href=g>", ["g"]),
    ("<!-- --!-> <a href=h> -->", []),
    ("<!-- ----> <a href=i>", ["i"]),
    ("<!x <a href=i>> <a href=j>", ["j"]),
    ("<!DOCTYPE html <a href=k>><a href=l>", ["l"]),
    ("<? <a href=k> ?> <a href=l>", ["l"]),
    ("</a href=m> <a href=n>", ["n"]),
    ("</ <a href=o>> <a href=p>", ["p"]),
    ("<3 <a href=r>", ["r"]),
    ("<script>x</script ><a href=after>", ["after"]),
    ("<script>'</scripts>'<a href=no></script><a href=yes>", ["yes"]),
    ("<STYLE><a href=no></style/><a href=yes>", ["yes"]),
    ("<title><a href=t></title><textarea><a href=ta></TEXTAREA><a href=after>", ["after"]),
    ("<xmp><a href=1></xmp><iframe><a href=2></iframe><noembed><a href=3></noembed><noframes><a href=4></noframes>"
     "<a href=5>", ["5"]),
    ("<noscript><a href=x></noscript>", ["x"]),  # scripting is off: noscript holds elements
    ("<a href=1><plaintext><a href=2>", ["1"]),
    ("<table><tr><td><a href=1></td></tr></table><a href=2>", ["1", "2"]),
    ("<table><caption><a href=c></caption><tr><th><a href=1><td><a href=2></table>", ["c", "1", "2"]),
    # an inline svg icon holds no link and leaves the tree builder in foreign content: skipped whole
    ('<svg viewBox="0 0 24 24" class=icon><g><path d="M1 1"/></g><!-- <a href=c> --></SVG ><a href=after>', ["after"]),
    ("<table><svg><path/></svg><tr><td><a href=1></table>", ["1"]),
    ('<a href="a&amp;b&amp=c&ampx&notit;&not;&#65;&#x42&#0;&#x80;&#x81;&#xD800;&#1114112;&lt&ltx">',
     ["a&b&amp=c&ampx&notit;\u00acAB\ufffd\u20ac\x81\ufffd\ufffd<&ltx"]),
]


@pytest.mark.parametrize("html,hrefs", EXAMPLES)
def test_examples(html, hrefs):
    got = scanned(html)
    assert got is not None
    assert got[0] == hrefs
    same_page(html)


@pytest.mark.parametrize("html", [
    "<template><a href=t></a></template><a href=u>",
    "<svg><a href=v></a></svg>",
    "<svg><path/><![CDATA[<a href=c>]]></svg>",
    "<svg><foreignObject><a href=f></a></foreignObject></svg>",
    "<svg><path/><div><a href=b></svg>",  # an HTML element breaks out of foreign content
    "<svg><style><a href=s></style></svg>",  # no raw text in svg
    "<svg><svg></svg><a href=n></svg>",
    "<svg><path>",
    "<math><a href=m></a></math>",
    "<select><a href=s>y</a></select>",
    "<frameset><a href=f>",
    "<table><tr><td><a href=1></td><a href=2></table>",  # foster-parented: lexbor puts 2 before 1
    "<table><base href=/b/><tr><td><a href=x></table>",
    "<table><table><a href=1>",
    "<table><td>" * 40 + "<a href=deep>",  # past the modelled nesting
    "<table><tr><td><a href=1><col><a href=2></table>",  # a column closes the cell: 2 is foster-parented
    "<table><caption><a href=1><colgroup><a href=2></table>",
    "<script><!--<script></script><a href=in></script>--></script><a href=out>",
])
def test_pages_left_to_the_full_parser(html):
    assert scan(html) is None
    # and extract_links gives lexbor's answer for them, scanner or not
    assert extract_links(html.encode(), PAGE) == without_scanner(lambda: extract_links(html.encode(), PAGE))


# a "<?" in an svg is a bogus comment to the next ">": a "</svg>" inside it does not end the svg
SVG_BOGUS_COMMENTS = [
    ("<svg><?</svg>><textarea><p><a href=x>", ["x"], False),
    ("<svg><?</svg><![CDATA[><a href=y>", [], False),
    ("<svg><?</svg>><title><meta name=robots content=nofollow></title><a href=x>", [], True),
]


@pytest.mark.parametrize("html,links_,nofollow", SVG_BOGUS_COMMENTS)
def test_a_bogus_comment_in_an_svg_hides_its_end_tag(html, links_, nofollow):
    same_page(html)
    batch = extract_links(html.encode(), PAGE)
    assert batch.links == tuple(f"http://example.com/dir/{h}" for h in links_)
    assert batch.nofollow == (1 if nofollow else 0)
    assert batch == without_scanner(lambda: extract_links(html.encode(), PAGE))


def test_a_meta_in_a_table_is_moved_before_it():
    html = "<table><tr><td><meta name=robots content=a></td></tr><meta name=ROBOTS content=b></table><a href=x>"
    assert lexbor_found(html)[3] == [("ROBOTS", "b"), ("robots", "a")]  # foster-parented out of the table
    same_page(html)


# NUL: U+FFFD in a tag or attribute name or value (so no name of ours), ignored as text
NUL_PAGES = [
    '<a href="x\x00y">', "<a href='x\x00y'>", "<a href=x\x00y>", "<a href=\x00>", "<a\x00 href=1><a href=2>",
    "<a href\x00=1 href=2>", '<a h="\x00" href=3>', "<a \x00href=1>", "<a\x00>", "<\x00a href=1>",
    "</\x00<a href=1>><a href=2>", "<!\x00<a href=1>><a href=2>", "<!--\x00--><a href=5>",
    "<title>\x00</title><a href=3>", "<script>\x00</script><a href=3>", "<svg>\x00<path/></svg><a href=4>",
    "<a href=1>\x00<a href=2>", '<a href="&#\x00;">', "<table>\x00<tr><td><a href=1></table>",
    "<meta name=\x00robots content=nofollow><meta name=robots content='no\x00follow'><a href=6>",
]


@pytest.mark.parametrize("html", NUL_PAGES)
def test_nul_as_the_tokenizer_reads_it(html):
    assert scan(html) is not None
    same_page(html)
    body = html.encode()
    assert extract_links(body, PAGE) == without_scanner(lambda: extract_links(body, PAGE))


def test_a_huge_numeric_reference_is_a_replacement_character():
    digits = "1" * 5000
    assert unescape_attribute(f"&#{digits};x") == "\ufffdx"
    assert unescape_attribute(f"&#{'0' * 5000}65;") == "A"  # leading zeros count for nothing
    assert unescape_attribute(f"&#x{'f' * 5000};") == "\ufffd"
    body = b'<a href="&#' + b"1" * 4301 + b';"><a href=y>'
    batch = extract_links(body, PAGE)
    assert batch.links == ("http://example.com/dir/%EF%BF%BD", "http://example.com/dir/y")
    assert batch == without_scanner(lambda: extract_links(body, PAGE))


def test_base_meta_and_rel():
    html = ('<base><base href="/b/&amp;"><base href=/c/><meta name=robots content="No&#x46;ollow"><meta name=x>'
            "<a href=1 rel=NoFollow><a href=2 rel><area href=3 REL='nofollow me'>")
    assert scanned(html) == (["1", "2", "3"], ["NoFollow", "", "nofollow me"], "/b/&", [("robots", "NoFollow")], 3)
    same_page(html)


def test_every_string_kind():
    for extra in ("", "\u00e9", "\u20ac", "\U0001f600"):
        html = f"<p>{extra}</p><a href='/{extra}' rel=x>t</a><!-- {extra} -->"
        assert scanned(html) == ([f"/{extra}"], ["x"], None, [], 1)


def _available_memory() -> int:
    try:
        with open("/proc/meminfo") as f:
            return next(int(line.split()[1]) * 1024 for line in f if line.startswith("MemAvailable:"))
    except (OSError, StopIteration):
        return 0


_HUGE_NAMES = """
from workers._linkscan import scan
n, chunk = 2**31 + 5, 2**24
for head, tail in ((b"<a", b" href=x><a href=y>"), (b"<a ", b"=1 href=z>")):
    page = bytearray(len(head) + n + len(tail))
    page[:len(head)] = head
    for at in range(len(head), len(head) + n, chunk):
        page[at:min(at + chunk, len(head) + n)] = b"b" * (min(at + chunk, len(head) + n) - at)
    page[len(head) + n:] = tail
    text = page.decode("latin-1")
    del page
    print(scan(text)[0])
    del text
"""


@pytest.mark.skipif(_available_memory() < 10 * 2**30, reason="needs 10 GiB of free memory for 2 GiB names")
@pytest.mark.skipif("libasan" in os.environ.get("LD_PRELOAD", ""), reason="minutes under ASan; the normal run has it")
def test_a_name_past_two_to_the_31_is_no_name_of_ours():
    """Tag and attribute names of 2^31 + 5 characters: counted no further than the names it compares."""
    done = subprocess.run([sys.executable, "-c", _HUGE_NAMES], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])})
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split("\n")[:2] == ["['y']", "['z']"]


def test_a_limit_keeps_the_first_hrefs_and_robots_metas_and_counts_the_links():
    html = "<meta name=x><meta name=' Robots ' content=a>" * 3 + "<a href=1 rel=r><area href=2>" * 5
    hrefs, rels, base, metas, count = scan(html, 3)
    assert (hrefs, rels, count) == (["1", "2", "1"], ["r", None, "r"], 10)
    assert metas == [(" Robots ", "a")] * 3
    assert scan(html, 0)[0] == [] and scan(html)[4] == 10


def test_a_page_past_the_hrefs_it_reads():
    limit = max(links.MIN_HREFS, links.HREFS_PER_LINK * 5)
    html = "".join(f"<a href=/{i % 3}>" for i in range(limit)) + "<a href=/late><meta name=robots content=none>"
    for extract in (lambda: extract_links(html.encode(), PAGE, max_links=5),
                    lambda: without_scanner(lambda: extract_links(html.encode(), PAGE, max_links=5))):
        assert extract().nofollow == limit + 1  # the robots meta after them all still counts
    body = ("<meta name=x>" * 5000 + html.split("<meta")[0]).encode()
    for batch in (extract_links(body, PAGE, max_links=5), without_scanner(lambda: extract_links(body, PAGE, max_links=5))):
        assert batch.links == tuple(f"http://example.com/{i}" for i in range(3))
        assert batch.skipped == 1  # /late: past the hrefs read


def test_pieces_of_a_long_page_for_lexbor():
    text = "x" * 10 + "<a href=1>" * 1000 + "y" * 5000 + "<b>"
    pieces = list(links._pieces(text, 64))
    assert "".join(pieces) == text
    assert all(p.startswith("<") for p in pieces[1:])
    assert max(map(len, pieces[:-2])) <= 64 and len(pieces[-2]) == 5010  # no "<" to cut at: the piece runs on
    assert list(links._pieces("<a>", 64)) == ["<a>"]


def test_not_a_str():
    with pytest.raises(TypeError):
        scan(b"<a href=x>")


def test_misnested_links_repeat_in_the_dom_only():
    html = "<div><a href=javascript:x>t</div>more<p><a href=y>u</p>v"
    assert scanned(html)[0] == ["javascript:x", "y"]
    dom = lexbor_found(html)[0]
    assert len(dom) > 2 and list(dict.fromkeys(dom)) == ["javascript:x", "y"]  # clones of both
    batch = extract_links(html.encode(), PAGE)
    assert batch.links == without_scanner(lambda: extract_links(html.encode(), PAGE)).links
    assert batch.skipped == 1  # the javascript: href as written, once


def test_no_native_switches_it_off(monkeypatch):
    monkeypatch.setenv(NO_NATIVE_ENV, "1")
    assert links.scanner() is None
    monkeypatch.setenv(NO_NATIVE_ENV, "0")
    assert links.scanner() is scan


# -- against lexbor on generated pages ------------------------------------------------------------------

_pages = st.randoms(use_true_random=False).map(random_page)
_table_pages = st.randoms(use_true_random=False).map(random_table_page)


@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(html=_pages)
def test_generated_pages_match_lexbor(html):
    same_page(html)


@settings(max_examples=1000, deadline=None)
@given(html=_table_pages)
def test_generated_tables_match_lexbor(html):
    same_page(html)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(html=_pages, honor=st.booleans(), max_links=st.integers(0, 6))
def test_extract_links_with_and_without_the_scanner(html, honor, max_links):
    body = html.encode("utf-8", "surrogatepass")
    kw = {"honor_nofollow": honor, "max_links": max_links}
    with_scan = extract_links(body, PAGE, **kw)
    assert with_scan.links == without_scanner(lambda: extract_links(body, PAGE, **kw)).links


@given(value=st.text(alphabet=st.sampled_from(list("&#;xX0123456789abcdefAmpltgcoynot=?/ ")), max_size=30))
@settings(max_examples=500, deadline=None)
def test_character_references_as_lexbor_decodes_them(value):
    quoted = value.replace('"', "")
    assert unescape_attribute(quoted) == lexbor_found(f'<a href="{quoted}">')[0][0]


# -- real sites (the Debian documentation packages the crawl benchmark uses, when installed) -----------------

GIVEN_BACK = re.compile(r"<(?:template|math|select|frameset)[\s/>]", re.I)
SITES = [Path(p) for p in os.environ.get("FRONTIER_LINKSCAN_SITES", "/usr/share/doc/rust-doc/html:"
                                         "/usr/share/doc/openjdk-17-jre-headless/api:/usr/share/doc/python3-doc/html"
                                         ).split(":") if p]


@pytest.mark.parametrize("root", SITES, ids=str)
def test_real_site_pages(root):
    files = sorted(str(p) for p in root.rglob("*.html")) if root.is_dir() else []
    if not files:
        pytest.skip(f"{root} is not installed")
    random.Random(7).shuffle(files)
    cache = HrefCache()
    plain = answered = 0
    for path in files[:600]:
        body = Path(path).read_bytes()
        url = "http://127.0.0.1:8000/" + os.path.relpath(path, root)
        text = links.decode_html(body)
        found = scan(text)
        if not GIVEN_BACK.search(text):  # no element the scanner always leaves to lexbor
            plain += 1
            answered += found is not None
        same_page(text)
        assert extract_links(body, url, cache=cache) == without_scanner(lambda: extract_links(body, url))
    assert answered >= 0.9 * plain


@pytest.mark.parametrize("root", SITES, ids=str)
def test_real_long_pages_in_pieces(root):
    """lexbor parses a long page LEXBOR_PIECE characters at a time: on real long pages, as it parses it whole."""
    files = sorted(str(p) for p in root.rglob("*.html") if p.stat().st_size > links.LEXBOR_PIECE) if root.is_dir() else []
    if not files:
        pytest.skip(f"{root} is not installed or has no page longer than {links.LEXBOR_PIECE} bytes")
    for path in files[:8]:
        text = links.decode_html(Path(path).read_bytes())
        assert links._from_tree(links._lexbor_nodes(text, None)) == lexbor_found(text)


def test_a_meta_name_that_decodes_to_another_name_is_dropped_as_lexbor_drops_it():
    for html in ("<meta name=&#0;>", '<meta name="&#0;" content="noindex">', "<meta name=a&#1;b content=x>"):
        same_page(html)
        assert scanned(html)[3] == []
    assert scanned('<meta name="r&#111;bots" content="nofollow">')[3] == [("robots", "nofollow")]
