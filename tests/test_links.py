"""extract_links: an example table, then Hypothesis properties (never raises, only http(s) links)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from frontier.errors import ConfigError, InvalidURL
from frontier.url.canonical import DEFAULT_RULES, CanonicalRules, canonicalize, canonicalize_many
from workers.links import (
    HrefCache,
    LinkBatch,
    ScopeMemo,
    _base_url,
    _context_free,
    _decode,
    _is_nofollow,
    _meta_nofollow,
    charset_of,
    decode_html,
    encode_query,
    extract_links,
)

PAGE = "http://example.com/dir/page.html?x=1"


def links(body: bytes | str, page: str = PAGE, **kw) -> LinkBatch:
    if isinstance(body, str):
        body = body.encode("utf-8")
    return extract_links(body, page, **kw)


# (id, body, keyword args, expected links, expected skipped, expected nofollow)
CASES = [
    ("relative", '<a href="other.html">a</a><a href="/root">b</a><a href="../up/">c</a>', {},
     ("http://example.com/dir/other.html", "http://example.com/root", "http://example.com/up/"), 0, 0),
    ("absolute and protocol-relative", '<a href="HTTPS://Other.COM:443/a">x</a><a href="//cdn.net/s">y</a>', {},
     ("https://other.com/a", "http://cdn.net/s"), 0, 0),
    ("area elements count", '<map><area href="/m1"></map><a href="/a1">x</a>', {},
     ("http://example.com/m1", "http://example.com/a1"), 0, 0),
    ("base href", '<head><base href="http://base.org/b/"></head><a href="rel">x</a><a href="/abs">y</a>', {},
     ("http://base.org/b/rel", "http://base.org/abs"), 0, 0),
    ("relative base href", '<base href="/sub/"><a href="x">x</a>', {}, ("http://example.com/sub/x",), 0, 0),
    ("first base wins", '<base href="/one/"><base href="/two/"><a href="x">x</a>', {},
     ("http://example.com/one/x",), 0, 0),
    ("bad base ignored", '<base href="javascript:alert(1)"><a href="x">x</a>', {},
     ("http://example.com/dir/x",), 0, 0),
    ("base after the links still applies", '<a href="x">x</a><base href="/late/">', {},
     ("http://example.com/late/x",), 0, 0),
    ("nofollow honoured", '<a href="/f" rel="nofollow">x</a><a href="/k" rel="noopener NoFollow">y</a>'
     '<a href="/ok" rel="noopener">z</a>', {}, ("http://example.com/ok",), 0, 2),
    ("nofollow ignored when off", '<a href="/f" rel="nofollow">x</a><a href="/ok">z</a>',
     {"honor_nofollow": False}, ("http://example.com/f", "http://example.com/ok"), 0, 0),
    ("rel containing nofollow as a substring only", '<a href="/f" rel="nofollowme">x</a>', {},
     ("http://example.com/f",), 0, 0),
    ("meta robots nofollow", '<meta name="ROBOTS" content="noindex, NoFollow"><a href="/a">a</a><a href="/b">b</a>',
     {}, (), 0, 2),
    ("meta robots none", '<meta name="robots" content="none"><a href="/a">a</a>', {}, (), 0, 1),
    ("meta robots nofollow ignored when off", '<meta name="robots" content="nofollow"><a href="/a">a</a>',
     {"honor_nofollow": False}, ("http://example.com/a",), 0, 0),
    ("meta robots index,follow", '<meta name="robots" content="index,follow"><a href="/a">a</a>', {},
     ("http://example.com/a",), 0, 0),
    ("non-http schemes skipped and counted",
     '<a href="javascript:void(0)">j</a><a href="mailto:a@b.c">m</a><a href="data:text/html,hi">d</a>'
     '<a href="tel:+123">t</a><a href="ftp://x.org/">f</a><a href=" JavaScript:x">J</a><a href="/ok">ok</a>', {},
     ("http://example.com/ok",), 6, 0),
    ("repeated invalid hrefs are each counted", '<a href="javascript:;">1</a><a href="javascript:;">2</a>', {},
     (), 2, 0),
    ("invalid host and port skipped", '<a href="http://exa mple.com/">a</a><a href="http://x.com:99999/">b</a>'
     '<a href="http:///">c</a><a href="http://1.2.3.08/">d</a>', {}, (), 4, 0),
    ("resolved as a browser resolves them", '<a href="\\x">a</a><a href="\\\\other.org\\y">b</a>'
     '<a href="https:secure.org/">c</a><a href="///triple.org/p">d</a><a href="http:same">e</a>'
     '<a href="http://0x7f.1/">f</a><a href="https://%e2%98%83/">g</a>', {},
     ("http://example.com/x", "http://other.org/y", "https://secure.org/", "http://triple.org/p",
      "http://example.com/dir/same", "http://127.0.0.1/", "https://xn--n3h/"), 0, 0),
    ("javascript and data bases ignored", '<base href="data:text/html,x"><a href="x">x</a>', {},
     ("http://example.com/dir/x",), 0, 0),
    ("a base of another scheme makes relative links unusable",
     '<base href="ftp://files.org/pub/"><a href="x">x</a><a href="http://abs.org/">y</a>', {},
     ("http://abs.org/",), 1, 0),
    ("fragments dropped", '<a href="#top">a</a><a href="/p#s1">b</a><a href="/p#s2">c</a>', {},
     ("http://example.com/dir/page.html?x=1", "http://example.com/p"), 0, 0),
    ("fragments kept by the rules", '<a href="/p#s1">b</a>', {"rules": CanonicalRules(keep_fragment=True)},
     ("http://example.com/p#s1",), 0, 0),
    ("duplicates collapsed in page order", '<a href="/b">1</a><a href="/a">2</a><a href="/b">3</a>'
     '<a href="http://example.com/a">4</a><a href="/./b">5</a>', {},
     ("http://example.com/b", "http://example.com/a"), 0, 0),
    ("empty href is the page itself", '<a href="">x</a><a href>y</a>', {}, ("http://example.com/dir/page.html?x=1",),
     0, 0),
    ("whitespace in href", '<a href="  /sp ace\n ">x</a>', {}, ("http://example.com/sp%20ace",), 0, 0),
    ("anchors without href ignored", '<a name="x">x</a><a>y</a>', {}, (), 0, 0),
    ("max_links caps and counts the rest", "".join(f'<a href="/{i}">{i}</a>' for i in range(10)), {"max_links": 3},
     ("http://example.com/0", "http://example.com/1", "http://example.com/2"), 7, 0),
    ("max_links 0", '<a href="/a">a</a>', {"max_links": 0}, (), 1, 0),
    ("broken tags", '<html><a href="/a"<b>x</a><a href=\'/b\' <a href=/c>c<div></p></a></table><a href="/d', {},
     None, None, 0),
    ("empty body", "", {}, (), 0, 0),
    ("no links", "<html><body><p>hello</p></body></html>", {}, (), 0, 0),
    ("links in script are not links", '<script>var s = "<a href=/x>";</script><a href="/y">y</a>', {},
     ("http://example.com/y",), 0, 0),
]


@pytest.mark.parametrize(("body", "kw", "expected", "skipped", "nofollow"),
                         [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_examples(body, kw, expected, skipped, nofollow):
    got = links(body, **kw)
    if expected is not None:
        assert got.links == expected
    if skipped is not None:
        assert got.skipped == skipped
    assert got.nofollow == nofollow


def test_broken_tags_still_yield_the_well_formed_links():
    got = links('<div><a href="/a">x<p><a href="/b">y</table></div></span><a href="/c">')
    assert got.links == ("http://example.com/a", "http://example.com/b", "http://example.com/c")


def test_latin1_page_from_meta_charset():
    body = '<meta charset="iso-8859-1"><a href="/caf\u00e9">x</a>'.encode("latin-1")
    assert links(body).links == ("http://example.com/caf%C3%A9",)


def test_latin1_page_from_http_equiv():
    body = ('<meta http-equiv="Content-Type" content="text/html; charset=ISO-8859-1">'
            '<a href="/\u00fcber">x</a>').encode("latin-1")
    assert links(body).links == ("http://example.com/%C3%BCber",)


def test_content_type_header_beats_meta():
    body = '<meta charset="utf-8"><a href="/\u00e9">x</a>'.encode("latin-1")
    assert links(body, content_type="text/html; charset=latin-1").links == ("http://example.com/%C3%A9",)
    # and the meta is used without a header charset: the lone 0xE9 byte is not UTF-8
    assert links(body).links == ("http://example.com/%EF%BF%BD",)


def test_windows_1251_page():
    body = '<a href="/\u043f\u0440\u0438\u0432\u0435\u0442">x</a>'.encode("cp1251")
    got = links(body, content_type="text/html; charset=windows-1251")
    assert got.links == ("http://example.com/%D0%BF%D1%80%D0%B8%D0%B2%D0%B5%D1%82",)


@pytest.mark.parametrize("label", ["no-such-charset", "rot13", "base64", "idna", "utf-7", "undefined", "", "\"\""])
def test_unknown_or_non_web_charset_falls_back_to_utf8(label):
    body = '<a href="/\u00e9">x</a>'.encode("utf-8")
    assert links(body, content_type=f"text/html; charset={label}").links == ("http://example.com/%C3%A9",)
    meta = f'<meta charset="{label}">'.encode() + body
    assert links(meta).links == ("http://example.com/%C3%A9",)


def test_utf16_with_bom():
    body = '<a href="/\u00e9">x</a>'.encode("utf-16")  # with BOM
    assert links(body).links == ("http://example.com/%C3%A9",)


def test_utf8_bom_beats_header():
    body = b"\xef\xbb\xbf" + '<a href="/\u00e9">x</a>'.encode("utf-8")
    assert links(body, content_type="text/html; charset=latin-1").links == ("http://example.com/%C3%A9",)


def test_non_utf8_bytes_in_href_are_replaced_then_percent_encoded():
    got = links(b'<a href="/a\xff\xfeb">x</a>')
    assert got.links == ("http://example.com/a%EF%BF%BD%EF%BF%BDb",)


def test_nul_bytes():
    got = links(b'<a href="/a\x00b">x</a>\x00\x00<a href="/c">c</a>')
    assert got.links[-1] == "http://example.com/c"
    assert all(link.startswith("http://example.com/") for link in got.links)


def test_binary_garbage():
    body = bytes(range(256)) * 64 + b'<a href="/after">x</a>'
    got = links(body)
    assert all(link.startswith(("http://", "https://")) for link in got.links)


def test_100kb_href():
    long_path = "/" + "a" * 100_000
    got = links(f'<a href="{long_path}">x</a><a href="/short">y</a>')
    assert got.links == ("http://example.com" + long_path, "http://example.com/short")


@pytest.mark.parametrize(("charset", "expected"), [
    ("windows-1252", "http://example.com/caf%C3%A9?q=caf%E9&x=%26%2320320%3B"),  # 你 is not in windows-1252
    ("shift_jis", "http://example.com/caf%C3%A9?q=caf%26%23233%3B&x=%93%FA"),  # é is not in Shift_JIS
    ("utf-8", "http://example.com/caf%C3%A9?q=caf%C3%A9&x=%E4%BD%A0"),
])
def test_query_in_the_page_encoding(charset, expected):
    """Browsers encode a link's query (never its path) in the page's encoding."""
    href = {"windows-1252": "/caf\u00e9?x=\u4f60&q=caf\u00e9", "shift_jis": "/caf\u00e9?x=\u65e5&q=caf\u00e9",
            "utf-8": "/caf\u00e9?x=\u4f60&q=caf\u00e9"}[charset]
    body = f'<meta charset="{charset}"><a href="{href}">x</a>'.encode(charset, "xmlcharrefreplace")
    assert links(body).links == (expected,)


def test_encode_query():
    assert encode_query("/a?b=\u00e9#\u00e9", "cp1252") == "/a?b=%E9#\u00e9"  # the fragment stays UTF-8
    assert encode_query("/\u00e9", "cp1252") == "/\u00e9"  # no query
    assert encode_query("?\u00e9", "utf-16-le") == "?\u00e9"  # UTF-16 pages use UTF-8 for URLs
    assert encode_query("?\u00e9\u4f60\u00e9", "cp1252") == "?%E9%26%2320320%3B%E9"
    assert encode_query("?\u00e9", "iso2022_jp") == "?%26%23233%3B"
    assert encode_query("?\u65e5", "iso2022_jp") == "?%1B$BF|%1B(B"  # escapes switch the character set


def test_invalid_page_url_keeps_absolute_links_and_skips_relative():
    got = extract_links(b'<a href="/rel">x</a><a href="http://abs.com/">y</a>', "not a url")
    assert got.links == ("http://abs.com/",)
    assert got.skipped == 1


def test_links_are_canonical():
    got = links('<a href="HTTP://EXAMPLE.com:80/a/./b/../c?b=2&a=1#frag">x</a>')
    assert got.links == ("http://example.com/a/c?a=1&b=2",)
    assert all(canonicalize(u) == u for u in got.links)


def test_charset_helpers():
    assert charset_of(b"", "text/html; charset=UTF-8") == ("utf-8", 0)
    assert charset_of(b'<meta charset="latin1">') == ("cp1252", 0)
    assert charset_of(b" " * 3000 + b'<meta charset="latin1">') == ("utf-8", 0)  # past the 2 KB sniff
    assert charset_of(b'<meta charset="utf-16">') == ("utf-8", 0)
    assert decode_html(b"\xef\xbb\xbfabc") == "abc"


# -- properties -----------------------------------------------------------------------------------

_fragments = st.sampled_from([
    b"<a href=", b"<a href='", b'<a href="', b"<area href=", b"<base href=", b"<meta charset=", b"<meta name=robots",
    b" content=nofollow>", b">", b'"', b"'", b"/", b"../", b"#", b"?", b"&", b"javascript:", b"mailto:x@y",
    b"http://", b"https://", b"//", b"h.com", b":8080", b"\x00", b"\xff", b"\xe9", b" ", b"\n", b"%", b"%zz",
    b"[::1]", b"rel=nofollow", b"<!--", b"-->", b"<script>", b"</script>", b"latin1", b"utf-16", b"\xef\xbb\xbf",
])
_bodies = st.one_of(st.binary(max_size=2000), st.lists(st.one_of(_fragments, st.binary(max_size=8)),
                                                       max_size=60).map(b"".join))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(body=_bodies, content_type=st.one_of(st.none(), st.text(max_size=40)),
       honor=st.booleans(), max_links=st.integers(0, 5))
def test_never_raises_and_only_http_links(body, content_type, honor, max_links):
    got = extract_links(body, PAGE, content_type=content_type, honor_nofollow=honor, max_links=max_links)
    assert isinstance(got, LinkBatch)
    assert len(got.links) <= max_links
    assert len(set(got.links)) == len(got.links)
    assert got.skipped >= 0 and got.nofollow >= 0
    for link in got.links:
        assert link.startswith(("http://", "https://"))
        assert canonicalize(link) == link


@settings(max_examples=100, deadline=None)
@given(hrefs=st.lists(st.text(max_size=30), max_size=20))
def test_every_href_is_accounted_for(hrefs):
    import html

    body = "".join(f'<a href="{html.escape(h, quote=True)}">x</a>' for h in hrefs).encode("utf-8", "replace")
    got = extract_links(body, PAGE, max_links=100)
    # distinct links + invalid hrefs (each occurrence) never exceed the hrefs present
    assert len(got.links) + got.skipped <= len(hrefs)


# -- the batch and the cache change no answer ------------------------------------------------------------


def reference_links(body: bytes, page_url: str, *, content_type=None, honor_nofollow=True, rules=DEFAULT_RULES,
                    max_links=20_000) -> LinkBatch:
    """extract_links as it was written first: one canonicalize call per distinct href, in page order."""
    from selectolax.lexbor import LexborHTMLParser

    if not body:
        return LinkBatch(())
    text, codec = _decode(body, content_type)
    tree = LexborHTMLParser(text)
    nodes = tree.css("a[href], area[href]")
    if not nodes:
        return LinkBatch(())
    if honor_nofollow and _meta_nofollow(tree.css("meta[name]")):
        return LinkBatch((), nofollow=len(nodes))
    base = page_url
    base_node = tree.css_first("base[href]")
    if base_node is not None and base_node.attributes.get("href"):
        base = _base_url(encode_query(base_node.attributes.get("href"), codec), page_url, rules)
    seen, done, skipped, nofollow = {}, {}, 0, 0
    for i, node in enumerate(nodes):
        if len(seen) >= max_links:
            skipped += len(nodes) - i
            break
        attrs = node.attributes
        if honor_nofollow and attrs.get("rel") and _is_nofollow(attrs.get("rel")):
            nofollow += 1
            continue
        href = attrs.get("href") or ""
        if href in done:
            skipped += not done[href]
            continue
        try:
            seen[canonicalize(encode_query(href, codec), base=base, rules=rules)] = None
            done[href] = True
        except InvalidURL:
            done[href] = False
            skipped += 1
    return LinkBatch(tuple(seen), skipped=skipped, nofollow=nofollow)


_HREFS = ["", " ", "?q=1", "#top", "/a", "a", "../a", "./b/../c", "//other.org/x", "http://o.org", "HTTP:?x",
          "http:", "https:#f", "http:rel", "https:/abs", "\\back", "\tab\t/x", " /lead", "x\ny", "mailto:a@b",
          "javascript:;", "/\u00e9?q=\u00e9", "/a?b=2&a=1", "/%7e%2E", "a b", "http://exa mple.com/", "data:,x",
          "http://h:99999/", "%2e%2e/x", "ftp://f.org/", "/a#b#c"]
_BASES = ["http://example.com/dir/page.html?x=1", "http://example.com/dir/other.html", "http://example.com/dir/",
          "http://example.com/dir/page.html?y=2#frag", "https://example.com/dir/page.html", "http://example.com/",
          "http://example.com/d%C3%A9/p", "http://EXAMPLE.com/dir/../dir/page.html", "http://example.com/dir/p;x",
          "http://example.com/dir/sub\\page", "http://example.com/dir/%2e%2e/x", "not a url", "ftp://files.org/pub/"]
_RULE_SETS = [DEFAULT_RULES, CanonicalRules(keep_fragment=True, sort_query=False),
              CanonicalRules(strip_session_ids=True, strip_tracking=True)]
_page_st = st.lists(st.tuples(st.sampled_from(["a", "area", "base"]), st.one_of(st.sampled_from(_HREFS), st.text(max_size=12)),
                              st.sampled_from(["", "nofollow", "noopener"])), max_size=25)


def _html(page: list[tuple[str, str, str]]) -> bytes:
    import html

    return "".join(f'<{tag} href="{html.escape(href, quote=True)}" rel="{rel}">x</{tag}>'
                   for tag, href, rel in page).encode("utf-8", "surrogatepass").decode("utf-8", "replace").encode()


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pages=st.lists(st.tuples(_page_st, st.sampled_from(_BASES)), min_size=1, max_size=6),
       charset=st.sampled_from([None, "text/html; charset=windows-1252", "text/html; charset=shift_jis"]),
       honor=st.booleans(), max_links=st.integers(0, 30), rules=st.sampled_from(_RULE_SETS), size=st.integers(1, 40))
def test_batch_and_cache_change_no_answer(pages, charset, honor, max_links, rules, size):
    cache = HrefCache(rules, size=size)  # shared by the pages, as a worker shares it
    for page, url in pages:
        body = _html(page)
        kw = {"content_type": charset, "honor_nofollow": honor, "rules": rules, "max_links": max_links}
        expected = reference_links(body, url, **kw)
        assert extract_links(body, url, **kw) == expected
        assert extract_links(body, url, cache=cache, **kw) == expected


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(calls=st.lists(st.tuples(st.lists(st.text(max_size=10), unique=True, max_size=8),
                                st.one_of(st.none(), st.sampled_from(_BASES))), max_size=8),
       rules=st.sampled_from(_RULE_SETS), size=st.sampled_from([5, 1000]))
def test_cache_answers_are_canonicalize_many(calls, rules, size):
    """Every sample href against bases that share directories (some of them only as text), one shared cache."""
    cache = HrefCache(rules, size=size)
    for extra, base in calls:
        hrefs = list(dict.fromkeys(_HREFS + extra))
        assert cache.resolve(hrefs, base) == canonicalize_many(hrefs, base, rules)


def test_cache_hits_across_the_pages_of_a_directory():
    cache = HrefCache()
    hrefs = ["/about", "news.html", "../up", "http://other.org/", "?sort=asc", "#top", "", "javascript:;"]
    first = cache.resolve(hrefs, "http://example.com/dir/a.html")
    assert first == ["http://example.com/about", "http://example.com/dir/news.html", "http://example.com/up",
                     "http://other.org/", "http://example.com/dir/a.html?sort=asc", "http://example.com/dir/a.html",
                     "http://example.com/dir/a.html", None]
    assert (cache.hits, cache.misses) == (0, 8)
    second = cache.resolve(hrefs, "http://example.com/dir/b.html?x=1")
    assert second[:4] == first[:4] and second[7] is None  # from the cache
    assert second[4:7] == ["http://example.com/dir/b.html?sort=asc", "http://example.com/dir/b.html?x=1",
                           "http://example.com/dir/b.html?x=1"]  # these take the whole base: never cached
    assert (cache.hits, cache.misses) == (5, 11)
    cache.resolve(["news.html"], "http://example.com/other/c.html")  # another directory
    assert cache.misses == 12
    cache.resolve(["news.html"], "http://example.com/dir/./c.html")  # not canonical: not cached
    assert cache.misses == 13
    assert 0 < cache.hit_rate < 1
    with pytest.raises(ConfigError, match="cache"):
        extract_links(b'<a href="/x">x</a>', PAGE, rules=CanonicalRules(sort_query=False), cache=cache)


def test_cache_is_bounded():
    cache = HrefCache(size=10)
    for i in range(1000):
        cache.resolve([f"/p/{i}.html"], "http://example.com/")
    assert sum(map(len, cache._young.values())) + sum(map(len, cache._old.values())) <= 20
    assert cache.resolve(["/p/999.html"], "http://example.com/") == ["http://example.com/p/999.html"]
    assert cache.hits == 1
    with pytest.raises(ConfigError):
        HrefCache(size=0)


@pytest.mark.parametrize(("href", "free"), [
    ("/a", True), ("a", True), ("../a", True), ("//h.org/x", True), ("http://h.org/", True), ("http:x", True),
    ("HTTPS:/x", True), ("mailto:a@b", True), ("\\x", True), ("a b", True), ("/\u00e9", True),
    ("", False), ("?q", False), ("#f", False), (" /a", False), ("\t/a", False), ("a\nb", False), ("http:", False),
    ("HTTP:?q", False), ("https:#f", False), ("/a\x00", False),
])
def test_context_free(href, free):
    assert _context_free(href) is free


def test_links_past_max_links_are_not_all_resolved():
    body = "".join(f'<a href="/{i}">x</a>' for i in range(5000)).encode()
    cache = HrefCache()
    got = extract_links(body, PAGE, max_links=10, cache=cache)
    assert got.links == tuple(f"http://example.com/{i}" for i in range(10)) and got.skipped == 4990
    assert cache.misses <= 1024  # one slice of hrefs at most


@settings(max_examples=200, deadline=None)
@given(pages=st.lists(st.lists(st.sampled_from(["http://example.com/a", "http://example.com/a/a/a/a/b",
                                                "http://other.org/x", "http://example.com/" + "x" * 60,
                                                "https://example.com/b?q=1", "http://sub.example.com/"]),
                               max_size=8), max_size=12),
       size=st.integers(1, 5))
def test_scope_memo_keeps_what_the_scope_allows(pages, size):
    """The memo's answer is the scope's, page after page, across its generations (sizes 1-5: every swap)."""
    from frontier.url.scope import Scope

    scope = Scope(allowed_domains=["example.com"], max_url_length=50, max_segment_repeats=2)
    memo = ScopeMemo(scope.check, size=size)
    for page in pages:
        assert memo.kept(page) == [u for u in page if scope.check(u) is None]
    assert len(memo._young) < size + 8 and len(memo._old) < size + 8  # a generation: `size` links, plus a page's


def test_scope_memo_checks_a_link_once_while_it_is_young():
    checked: list[str] = []

    def check(url: str) -> str | None:
        checked.append(url)
        return None if "keep" in url else "out_of_scope"

    memo = ScopeMemo(check)
    menu = ["http://h/keep1", "http://h/drop", "http://h/keep2"]
    assert memo.kept(menu) == memo.kept(menu) == ["http://h/keep1", "http://h/keep2"]
    assert checked == menu
    with pytest.raises(ConfigError):
        ScopeMemo(check, size=0)
