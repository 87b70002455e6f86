"""canonicalize / url_host: an example table, w3lib as a peer, and Hypothesis properties."""

from __future__ import annotations

import re
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from frontier.canonical import (
    CANONICAL_VERSION,
    DEFAULT_RULES,
    CanonicalRules,
    canonicalize,
    url_host,
)
from frontier.errors import ConfigError, InvalidURL

RFC_BASE = "http://a/b/c/d;p?q"
C0_AND_SPACE = "".join(map(chr, range(0x21)))
UNRESERVED = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~"
ALL_OFF = CanonicalRules(sort_query=False)
STRIP = CanonicalRules(strip_session_ids=True, strip_tracking=True)
FRAGMENT = CanonicalRules(keep_fragment=True)

EXAMPLES = [
    # (url, base, rules, expected)
    ("HTTP://Example.COM:80/a/./b/../c?b=2&a=1#x", None, DEFAULT_RULES, "http://example.com/a/c?a=1&b=2"),
    ("http://example.com", None, DEFAULT_RULES, "http://example.com/"),
    ("HtTpS://WWW.Example.Com/Path/Keeps/Case", None, DEFAULT_RULES, "https://www.example.com/Path/Keeps/Case"),
    ("https://example.com:443/", None, DEFAULT_RULES, "https://example.com/"),
    ("https://example.com:80/", None, DEFAULT_RULES, "https://example.com:80/"),
    ("http://example.com:443/", None, DEFAULT_RULES, "http://example.com:443/"),
    ("http://example.com:08080/", None, DEFAULT_RULES, "http://example.com:8080/"),
    ("http://example.com:/x", None, DEFAULT_RULES, "http://example.com/x"),
    ("http://user:secret@example.com/", None, DEFAULT_RULES, "http://example.com/"),
    ("http://example.com./", None, DEFAULT_RULES, "http://example.com/"),
    ("http://example.com/a/b/../../../c", None, DEFAULT_RULES, "http://example.com/c"),
    ("http://example.com/a/%2E%2e/b", None, DEFAULT_RULES, "http://example.com/b"),
    ("http://example.com/a/..", None, DEFAULT_RULES, "http://example.com/"),
    ("http://example.com/a/.hidden/..x", None, DEFAULT_RULES, "http://example.com/a/.hidden/..x"),
    ("http://example.com/%7euser/%41%2d%5F%30", None, DEFAULT_RULES, "http://example.com/~user/A-_0"),
    ("http://example.com/a%2fb%3a%c3%bc", None, DEFAULT_RULES, "http://example.com/a%2Fb%3A%C3%BC"),
    ("http://example.com/100%/%zz%4", None, DEFAULT_RULES, "http://example.com/100%25/%25zz%254"),
    ("http://example.com/a b/<x>\"|^`{}\\", None, DEFAULT_RULES,
     "http://example.com/a%20b/%3Cx%3E%22%7C%5E%60%7B%7D%5C"),
    ("http://example.com/résumé", None, DEFAULT_RULES, "http://example.com/r%C3%A9sum%C3%A9"),
    ("http://example.com/\ud800?\udfff", None, DEFAULT_RULES, "http://example.com/%ED%A0%80?%ED%BF%BF"),
    ("http://" + "a." * 125 + "com./", None, DEFAULT_RULES, "http://" + "a." * 125 + "com/"),  # 253
    ("http://example.com/r%c3%a9sum%C3%A9", None, DEFAULT_RULES, "http://example.com/r%C3%A9sum%C3%A9"),
    ("http://example.com/!$&'()*+,;=:@", None, DEFAULT_RULES, "http://example.com/!$&'()*+,;=:@"),
    ("http://bücher.example/", None, DEFAULT_RULES, "http://xn--bcher-kva.example/"),
    ("http://BÜCHER.Example.:8080/", None, DEFAULT_RULES, "http://xn--bcher-kva.example:8080/"),
    ("http://例え.テスト/", None, DEFAULT_RULES, "http://xn--r8jz45g.xn--zckzah/"),
    ("http://[2001:DB8:0:0:1:0:0:1]/", None, DEFAULT_RULES, "http://[2001:db8::1:0:0:1]/"),
    ("http://[::1]:8080/x", None, DEFAULT_RULES, "http://[::1]:8080/x"),
    ("https://[::FFFF:1.2.3.4]:443/", None, DEFAULT_RULES, "https://[::ffff:102:304]/"),
    ("http://192.168.0.1:80/", None, DEFAULT_RULES, "http://192.168.0.1/"),
    ("  \t http://exa\nmple.com/a\r\nb \x00", None, DEFAULT_RULES, "http://example.com/ab"),
    ("http://example.com/#frag", None, DEFAULT_RULES, "http://example.com/"),
    ("http://example.com/p#Frag%7e x", None, FRAGMENT, "http://example.com/p#Frag~%20x"),
    ("http://example.com/p#", None, FRAGMENT, "http://example.com/p"),
    ("http://example.com/p#a#b", None, FRAGMENT, "http://example.com/p#a%23b"),
    ("http://example.com/?", None, DEFAULT_RULES, "http://example.com/"),
    ("http://example.com/?&&", None, DEFAULT_RULES, "http://example.com/"),
    ("http://example.com/?c=3&b=2&a=1", None, DEFAULT_RULES, "http://example.com/?a=1&b=2&c=3"),
    ("http://example.com/?b=2&a=9&b=1&a=8", None, DEFAULT_RULES, "http://example.com/?a=9&a=8&b=2&b=1"),
    ("http://example.com/?a-b=1&a=2", None, DEFAULT_RULES, "http://example.com/?a=2&a-b=1"),
    ("http://example.com/?c=3&b=2&&a=1", None, ALL_OFF, "http://example.com/?c=3&b=2&&a=1"),
    ("http://example.com/?q=a+b%20c d&x=%2f%7E", None, DEFAULT_RULES, "http://example.com/?q=a+b%20c%20d&x=%2F~"),
    ("http://example.com/?q=ü[]&a='", None, DEFAULT_RULES, "http://example.com/?a='&q=%C3%BC%5B%5D"),
    ("http://example.com/?q=/?:@", None, DEFAULT_RULES, "http://example.com/?q=/?:@"),
    ("http://example.com/x?utm_source=a&id=1&gclid=z&fbclid=y&UTM_Medium=b", None, STRIP, "http://example.com/x?id=1"),
    ("http://example.com/x?utm_source=a&id=1", None, DEFAULT_RULES, "http://example.com/x?id=1&utm_source=a"),
    ("http://example.com/x?JSESSIONID=1&PHPSESSID=2&sid=3&page=4", None, STRIP, "http://example.com/x?page=4"),
    ("http://example.com/shop;jsessionid=A1B2/item.jsp;JSESSIONID=C3?id=1&sessionid=9", None, STRIP,
     "http://example.com/shop/item.jsp?id=1"),
    ("http://example.com/item.jsp;jsessionid=C3", None, DEFAULT_RULES, "http://example.com/item.jsp;jsessionid=C3"),
    ("http://example.com/x?utm_source=a", None, STRIP, "http://example.com/x"),
    # RFC 3986 section 5.4.1 normal examples (fragments dropped by the default rules)
    ("g", RFC_BASE, DEFAULT_RULES, "http://a/b/c/g"),
    ("./g", RFC_BASE, DEFAULT_RULES, "http://a/b/c/g"),
    ("g/", RFC_BASE, DEFAULT_RULES, "http://a/b/c/g/"),
    ("/g", RFC_BASE, DEFAULT_RULES, "http://a/g"),
    ("//g", RFC_BASE, DEFAULT_RULES, "http://g/"),
    ("?y", RFC_BASE, DEFAULT_RULES, "http://a/b/c/d;p?y"),
    ("g?y", RFC_BASE, DEFAULT_RULES, "http://a/b/c/g?y"),
    ("#s", RFC_BASE, FRAGMENT, "http://a/b/c/d;p?q#s"),
    ("g#s", RFC_BASE, FRAGMENT, "http://a/b/c/g#s"),
    ("g?y#s", RFC_BASE, FRAGMENT, "http://a/b/c/g?y#s"),
    (";x", RFC_BASE, DEFAULT_RULES, "http://a/b/c/;x"),
    ("g;x", RFC_BASE, DEFAULT_RULES, "http://a/b/c/g;x"),
    ("g;x?y#s", RFC_BASE, FRAGMENT, "http://a/b/c/g;x?y#s"),
    ("", RFC_BASE, DEFAULT_RULES, "http://a/b/c/d;p?q"),
    (".", RFC_BASE, DEFAULT_RULES, "http://a/b/c/"),
    ("./", RFC_BASE, DEFAULT_RULES, "http://a/b/c/"),
    ("..", RFC_BASE, DEFAULT_RULES, "http://a/b/"),
    ("../", RFC_BASE, DEFAULT_RULES, "http://a/b/"),
    ("../g", RFC_BASE, DEFAULT_RULES, "http://a/b/g"),
    ("../..", RFC_BASE, DEFAULT_RULES, "http://a/"),
    ("../../", RFC_BASE, DEFAULT_RULES, "http://a/"),
    ("../../g", RFC_BASE, DEFAULT_RULES, "http://a/g"),
    # RFC 3986 section 5.4.2 abnormal examples
    ("../../../g", RFC_BASE, DEFAULT_RULES, "http://a/g"),
    ("/./g", RFC_BASE, DEFAULT_RULES, "http://a/g"),
    ("/../g", RFC_BASE, DEFAULT_RULES, "http://a/g"),
    ("g.", RFC_BASE, DEFAULT_RULES, "http://a/b/c/g."),
    ("..g", RFC_BASE, DEFAULT_RULES, "http://a/b/c/..g"),
    ("./g/.", RFC_BASE, DEFAULT_RULES, "http://a/b/c/g/"),
    ("g;x=1/../y", RFC_BASE, DEFAULT_RULES, "http://a/b/c/y"),
    ("g?y/../x", RFC_BASE, DEFAULT_RULES, "http://a/b/c/g?y/../x"),
    ("g#s/../x", RFC_BASE, FRAGMENT, "http://a/b/c/g#s/../x"),
    ("http:g", RFC_BASE, DEFAULT_RULES, "http://a/b/c/g"),  # the non-strict reading, as browsers do
    # other bases and references
    ("page2.html", "https://Example.com", DEFAULT_RULES, "https://example.com/page2.html"),
    ("?page=2", "https://example.com/list?page=1#top", DEFAULT_RULES, "https://example.com/list?page=2"),
    ("#top", "https://example.com/list?b=1&a=2", DEFAULT_RULES, "https://example.com/list?a=2&b=1"),
    ("//cdn.example.net/x.js", "https://example.com/", DEFAULT_RULES, "https://cdn.example.net/x.js"),
    ("HTTPS://Other.example/", "http://example.com/a/", DEFAULT_RULES, "https://other.example/"),
    ("  ../b c  ", "http://example.com/a/x/y", DEFAULT_RULES, "http://example.com/a/b%20c"),
]


@pytest.mark.parametrize(("url", "base", "rules", "expected"), EXAMPLES)
def test_examples(url: str, base: str | None, rules: CanonicalRules, expected: str) -> None:
    assert canonicalize(url, base, rules) == expected
    assert canonicalize(expected, rules=rules) == expected


INVALID = [
    ("javascript:void(0)", None, "unsupported scheme"),
    ("JavaScript:alert(1)", RFC_BASE, "unsupported scheme"),
    ("mailto:someone@example.com", RFC_BASE, "unsupported scheme"),
    ("data:text/plain,hi", None, "unsupported scheme"),
    ("ftp://example.com/file", None, "unsupported scheme"),
    ("tel:+123", RFC_BASE, "unsupported scheme"),
    ("http://example.com:99999/", None, "invalid port"),
    ("http://example.com:65536/", None, "invalid port"),
    ("http://example.com:8o/", None, "invalid port"),
    ("http://example.com:80:80/", None, "invalid port"),
    ("http://example.com:٨٠/", None, "invalid port"),
    ("http://example.com:" + "9" * 5000 + "/", None, "invalid port"),
    ("http://", None, "empty host"),
    ("http:///path", None, "empty host"),
    ("http://:80/", None, "empty host"),
    ("http://user@/", None, "empty host"),
    ("http://.../", None, "empty host"),
    ("http:path", None, "empty host"),
    ("https:g", RFC_BASE, "empty host"),
    ("http://exa mple.com/", None, "invalid host"),
    ("http://a..b/", None, "invalid host"),
    ("http://ex%41mple.com/", None, "invalid host"),
    ("http://[::1/", None, "invalid host"),
    ("http://[::1]x/", None, "invalid host"),
    ("http://[fe80::1%25eth0]/", None, "invalid host"),
    ("http://[1:2:3]/", None, "invalid host"),
    ("http://" + "ü" * 70 + ".com/", None, "invalid host"),
    ("http://" + "a" * 64 + ".com/", None, "invalid host"),
    ("http://" + "a." * 126 + "com/", None, "invalid host"),  # 255 characters
    ("http://" + "ü." * 126 + "com/", None, "invalid host"),
    ("http://\ud800.com/", None, "invalid host"),
    ("", None, "relative URL without a base"),
    ("/path", None, "relative URL without a base"),
    ("//example.com/x", None, "relative URL without a base"),
    ("g", "mailto:x@y", "unsupported scheme"),
    ("g", "/relative/base", "base is not an absolute http(s) URL"),
]


@pytest.mark.parametrize(("url", "base", "reason"), INVALID)
def test_invalid(url: str, base: str | None, reason: str) -> None:
    with pytest.raises(InvalidURL) as info:
        canonicalize(url, base)
    assert info.value.reason == reason
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize("value", [None, b"http://example.com/", 42, ["http://example.com/"]])
def test_not_a_string(value: object) -> None:
    with pytest.raises(InvalidURL, match="not a string"):
        canonicalize(value)  # type: ignore[arg-type]
    if value is not None:  # a None base means "no base"
        with pytest.raises(InvalidURL, match="not a string"):
            canonicalize("g", value)  # type: ignore[arg-type]


def test_every_escape() -> None:
    unreserved = set(UNRESERVED)
    for byte in range(256):
        hexes = f"{byte:02X}"
        want = chr(byte) if chr(byte) in unreserved else f"%{hexes}"
        for esc in {hexes, hexes.lower(), hexes[0] + hexes[1].lower(), hexes[0].lower() + hexes[1]}:
            assert canonicalize(f"http://a/x%{esc}?%{esc}") == f"http://a/x{want}?{want}"


def test_base_only_read_for_relative_references() -> None:
    assert canonicalize("http://example.com/", "not a url") == "http://example.com/"


def test_rules_are_checked_and_tagged() -> None:
    with pytest.raises(ConfigError) as info:
        CanonicalRules(sort_query="yes")  # type: ignore[arg-type]
    assert info.value.key == "sort_query"
    assert DEFAULT_RULES.version_tag() == f"canon{CANONICAL_VERSION}+sort_query"
    assert CanonicalRules(sort_query=False).version_tag() == f"canon{CANONICAL_VERSION}"
    tags = {
        CanonicalRules(sort_query=a, strip_session_ids=b, strip_tracking=c, keep_fragment=d).version_tag()
        for a in (False, True) for b in (False, True) for c in (False, True) for d in (False, True)
    }
    assert len(tags) == 16


@pytest.mark.parametrize(
    ("url", "host"),
    [
        ("http://example.com/", "example.com"),
        ("https://example.com:8443/a?b#c", "example.com:8443"),
        ("http://[::1]:8080/", "[::1]:8080"),
        ("https://xn--bcher-kva.example/x/y", "xn--bcher-kva.example"),
    ],
)
def test_url_host(url: str, host: str) -> None:
    assert url_host(url) == host


# w3lib as a peer, on URLs where its output is RFC 3986-correct: no dot-segments or default ports (w3lib
# before 2.5 keeps them), no userinfo (kept), IPv6, escaped reserved characters like %21 (decoded), spaces
# (turned into "+") or "/" in queries (escaped), and no duplicate keys (w3lib sorts them by value).
PEER_URLS = [
    "http://www.example.com/do?c=1&b=2&a=3",
    "http://www.example.com/do?price=%a3500&a=5&z=3",
    "http://www.example.com/do?q=a+b&a=1",
    "http://www.example.com/r\u00e9sum\u00e9",
    "http://www.example.com/r%c3%a9sum%c3%a9",
    "http://www.example.com/caf%e9-curry",
    "http://www.example.com/a%a3do",
    "http://www.example.com/%7Euser",
    "http://www.EXAMPLE.com/Path",
    "http://www.example.com",
    "http://www.example.com/do?a=1#frag",
    "http://www.example.com/path with spaces",
    "http://www.example.com:8080/x",
    "https://www.example.com:8443/x?b=2&a=1",
    "http://www.bücher.de/",
    "http://www.example.com/a%2fb",
    "http://www.example.com/do?a=%2f&b=%e2%82%ac",
    "https://example.com/a/b/c.html?x=1&y=2",
    "http://www.example.com/do?k=v%7Ealue",
    "http://www.example.com/ü/ö?a=1",
]


@pytest.mark.parametrize("url", PEER_URLS)
def test_agrees_with_w3lib(url: str) -> None:
    w3lib_url = pytest.importorskip("w3lib.url")
    assert canonicalize(url) == w3lib_url.canonicalize_url(url)


# Hypothesis -----------------------------------------------------------------------------------------

rules_st = st.builds(
    CanonicalRules,
    sort_query=st.booleans(),
    strip_session_ids=st.booleans(),
    strip_tracking=st.booleans(),
    keep_fragment=st.booleans(),
)
label_st = st.text("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_", min_size=1, max_size=12)
ascii_host_st = st.lists(label_st, min_size=1, max_size=4).map(".".join)
piece_st = st.one_of(
    st.sampled_from([".", "..", "%", "%2e", "%2F", "%7e", "%zz", "%C3%BC", "a", "B", ";jsessionid=x", "=", "&",
                     "?", "#", "/", "//", " ", "+", "ü", "€", "\t", "utm_source", "sid", ":", "@", "[", "]", "\\"]),
    st.text(max_size=4),
)
chunk_st = st.lists(piece_st, max_size=8).map("".join)


@st.composite
def url_parts(draw: st.DrawFn) -> tuple[str, str, str]:
    """(url, scheme, expected url_host) for URL-shaped strings."""
    scheme = draw(st.sampled_from(["http", "https", "HTTP", "Https"]))
    host = draw(ascii_host_st)
    port = draw(st.none() | st.integers(0, 65535))
    user = draw(st.sampled_from(["", "user@", "u:p@"]))
    trailing_dot = draw(st.sampled_from(["", "."]))
    netloc = user + host + trailing_dot + ("" if port is None else f":{port}")
    url = f"{scheme}://{netloc}"
    if draw(st.booleans()):
        url += "/" + draw(chunk_st)
    if draw(st.booleans()):
        url += "?" + draw(chunk_st)
    if draw(st.booleans()):
        url += "#" + draw(chunk_st)
    default = 80 if scheme.lower() == "http" else 443
    expected_host = host.lower() + ("" if port in (None, default) else f":{port}")
    return url, scheme.lower(), expected_host


def check_output(out: str, rules: CanonicalRules) -> None:
    assert out.startswith(("http://", "https://"))
    assert out.isascii() and out.isprintable() and " " not in out
    assert "#" not in out or rules.keep_fragment
    assert canonicalize(out, rules=rules) == out


@settings(max_examples=400, deadline=None)
@given(st.text(), rules_st)
def test_any_text_raises_only_invalid_url(text: str, rules: CanonicalRules) -> None:
    for base in (None, RFC_BASE):
        try:
            out = canonicalize(text, base, rules)
        except InvalidURL:
            continue
        check_output(out, rules)


@settings(max_examples=300, deadline=None)
@given(st.text(), st.text(), rules_st)
def test_any_base_raises_only_invalid_url(text: str, base: str, rules: CanonicalRules) -> None:
    try:
        out = canonicalize(text, base, rules)
    except InvalidURL:
        return
    check_output(out, rules)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(url_parts(), rules_st)
def test_url_shaped(parts: tuple[str, str, str], rules: CanonicalRules) -> None:
    url, scheme, expected_host = parts
    out = canonicalize(url, rules=rules)  # an ASCII host and a valid port never raise
    check_output(out, rules)
    assert out.startswith(scheme + "://")
    assert url_host(out) == expected_host


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(url_parts(), chunk_st, rules_st)
def test_resolved_references(parts: tuple[str, str, str], ref: str, rules: CanonicalRules) -> None:
    base = parts[0]
    try:
        out = canonicalize(ref, base, rules)
    except InvalidURL:
        return
    check_output(out, rules)
    cleaned = ref.strip(C0_AND_SPACE).replace("\t", "").replace("\n", "").replace("\r", "")
    if not cleaned.startswith("//") and not re.match(r"[A-Za-z][A-Za-z0-9+.\-]*:", cleaned):
        assert url_host(out) == parts[2]  # a relative reference keeps the base's host


@st.composite
def equivalent_spellings(draw: st.DrawFn) -> tuple[str, str]:
    """(canonical URL, another spelling of it that RFC 3986 section 6 says is equivalent)."""
    scheme = draw(st.sampled_from(["http", "https"]))
    host = draw(st.lists(st.text("abcdefghijklmnopqrstuvwxyz0123456789", min_size=1, max_size=8),
                         min_size=1, max_size=3).map(".".join))
    segments = draw(st.lists(st.text(UNRESERVED, min_size=1, max_size=6).filter(lambda s: s not in (".", "..")),
                             max_size=4))
    keys = draw(st.lists(st.text(UNRESERVED, min_size=1, max_size=4), unique=True, max_size=4))
    params = [(k, draw(st.text(UNRESERVED, max_size=4))) for k in sorted(keys)]
    query = "&".join(f"{k}={v}" for k, v in params)
    canonical = f"{scheme}://{host}/" + "/".join(segments) + ("?" + query if query else "")

    def respell(text: str) -> str:  # percent-encode some unreserved characters, in either case of hex
        out = []
        for ch in text:
            if draw(st.booleans()):
                esc = f"%{ord(ch):02X}"
                out.append(esc.lower() if draw(st.booleans()) else esc)
            else:
                out.append(ch)
        return "".join(out)

    path = ""
    for seg in segments:
        path += draw(st.sampled_from(["", "/.", "/x/..", "/%2E", "/x/%2e%2E"])) + "/" + respell(seg)
    if not segments:  # the empty path and the root
        path = draw(st.sampled_from(["", "/", "/.", "/x/..", "/./", "/%2e/"]))
    shuffled = draw(st.permutations(params))
    query = "&".join(respell(k) + "=" + respell(v) for k, v in shuffled) or draw(st.sampled_from(["", "?"]))
    port = draw(st.sampled_from(["", ":", ":80" if scheme == "http" else ":443"]))
    variant = (draw(st.sampled_from([scheme, scheme.upper(), scheme.title()])) + "://"
               + draw(st.sampled_from(["", "user:pw@"])) + draw(st.sampled_from([host, host.upper()]))
               + draw(st.sampled_from(["", "."])) + port + path + ("?" + query if shuffled else query)
               + draw(st.sampled_from(["", "#", "#frag"])))
    return canonical, variant


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(equivalent_spellings())
def test_equivalent_spellings_meet(pair: tuple[str, str]) -> None:
    canonical, variant = pair
    assert canonicalize(canonical) == canonical
    assert canonicalize(variant) == canonical


@settings(max_examples=200, deadline=None)
@given(st.text(st.characters(codec="utf-8", exclude_characters="/?#@:[]"), min_size=1, max_size=20))
def test_unicode_hosts_punycode_or_invalid(host: str) -> None:
    try:
        out = canonicalize(f"http://{host}/")
    except InvalidURL as exc:
        assert exc.reason in ("invalid host", "empty host")
        return
    assert url_host(out) == url_host(canonicalize(out))
    assert url_host(out).islower() or not any(c.isalpha() for c in url_host(out))


@pytest.mark.parametrize(
    "url",
    [
        "http://example.com/" + "./" * 200_000,
        "http://example.com/" + "a/../" * 100_000,
        "http://example.com/" + "%" * 300_000,
        "http://example.com/" + "%2e%2E/" * 50_000,
        "http://example.com/?" + "b=1&a=2&" * 50_000,
        "http://example.com/" + "ü" * 200_000,
        "http://" + "a." * 100_000 + "com/",
        "http://" + "a" * 300_000,
        "http://" + "".join(map(chr, range(0x4E00, 0x4E00 + 100_000))) + "/",  # punycode is quadratic
        "a" * 300_000 + ":",
        "/" * 300_000,
    ],
    ids=lambda u: repr(u[:25]),
)
def test_long_input_is_linear(url: str) -> None:
    start = time.perf_counter()
    try:
        canonicalize(url, "http://example.com/")
    except InvalidURL:
        pass
    assert time.perf_counter() - start < 2.0
