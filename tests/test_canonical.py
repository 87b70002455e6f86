"""canonicalize / url_host: WHATWG conformance on the web-platform-tests URL data, the fast path against ada,
an example table, w3lib as a peer, and Hypothesis properties."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest
from ada_url import normalize_url
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import frontier.url.canonical
from frontier.errors import ConfigError, InvalidURL, VersionMismatch
from frontier.seen.urlseen import URLSeen
from frontier.url.canonical import (
    CANONICAL_VERSION,
    DEFAULT_RULES,
    CanonicalRules,
    _canonical,
    _checked,
    _slow,
    canonicalize,
    canonicalize_many,
    scheme_of,
    url_host,
)

RFC_BASE = "http://a/b/c/d;p?q"
WPT_BASE = "http://example.org/foo/bar"
C0_AND_SPACE = "".join(map(chr, range(0x21)))
UNRESERVED = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~"
ALL_OFF = CanonicalRules(sort_query=False)
STRIP = CanonicalRules(strip_session_ids=True, strip_tracking=True)
FRAGMENT = CanonicalRules(keep_fragment=True)
RULE_SETS = [DEFAULT_RULES, CanonicalRules(sort_query=False, keep_fragment=True), STRIP]

# -- web-platform-tests url/resources/urltestdata.json (BSD-3-Clause, tests/data/LICENSE-wpt.md) ----------------

WPT = [c for c in json.loads((Path(__file__).parent / "data" / "urltestdata.json").read_text("utf-8"))
       if isinstance(c, dict)]
WPT_HTTP = [c for c in WPT if "href" in c and c["protocol"] in ("http:", "https:")]
WPT_REFUSED = [c for c in WPT if not ("href" in c and c["protocol"] in ("http:", "https:"))]

# Cases the standard parses and frontier refuses on purpose, with the reason frontier gives. No other
# exception: every other http(s) case must agree, every failure and every other scheme must be refused.
WPT_EXCEPTIONS = {
    # An empty DNS label: no resolver can look these names up (Python's own raises UnicodeError before
    # asking DNS), so frontier refuses them instead of queueing URLs that can never be fetched.
    ("http://./", None): "invalid host",
    ("http://../", None): "invalid host",
    ("http://foo.09..", None): "invalid host",
}


def _norm_escapes(text: str) -> str:
    """RFC 3986 section 6.2.2.2: hex digits uppercased, escapes of unreserved characters decoded."""
    def fix(m: re.Match[str]) -> str:
        ch = chr(int(m[1], 16))
        return ch if ch in UNRESERVED else "%" + m[1].upper()
    return re.sub(r"%([0-9A-Fa-f]{2})", fix, text)


def wpt_expected(case: dict, rules: CanonicalRules) -> str:
    """The standard's result (wpt's fields, not its href: so no userinfo) with frontier's dedup rules applied:
    escapes normalised, no empty query, params sorted by key when there are several, fragment only if kept."""
    out = case["protocol"] + "//" + case["hostname"] + (":" + case["port"] if case["port"] else "")
    out += _norm_escapes(case["pathname"])
    query = _norm_escapes(case["search"][1:])
    if rules.sort_query and "&" in query:
        query = "&".join(sorted(filter(None, query.split("&")), key=lambda p: p.partition("=")[0]))
    if query:
        out += "?" + query
    if rules.keep_fragment and case["hash"][1:]:
        out += "#" + _norm_escapes(case["hash"][1:])
    return out


def _wpt_id(case: dict) -> str:
    return repr(case["input"])[:60] + (" @ " + repr(case["base"])[:40] if case.get("base") else "")


@pytest.mark.parametrize("rules", [DEFAULT_RULES, CanonicalRules(sort_query=False, keep_fragment=True)],
                         ids=["default", "fragment"])
@pytest.mark.parametrize("case", WPT_HTTP, ids=_wpt_id)
def test_wpt_http_results(case: dict, rules: CanonicalRules) -> None:
    exception = WPT_EXCEPTIONS.get((case["input"], case["base"]))
    if exception is not None:
        with pytest.raises(InvalidURL) as info:
            canonicalize(case["input"], case["base"], rules)
        assert info.value.reason == exception
        return
    out = canonicalize(case["input"], case["base"], rules)
    assert out == wpt_expected(case, rules)
    assert canonicalize(out, rules=rules) == out


@pytest.mark.parametrize("case", WPT_REFUSED, ids=_wpt_id)
def test_wpt_failures_and_other_schemes_refused(case: dict) -> None:
    with pytest.raises(InvalidURL):
        canonicalize(case["input"], case["base"])


def test_wpt_agreement_figure() -> None:
    """The figure the README states: every case agrees but the listed exceptions, which all still occur."""
    agree = 0
    for case in WPT_HTTP:
        try:
            agree += canonicalize(case["input"], case["base"]) == wpt_expected(case, DEFAULT_RULES)
        except InvalidURL:
            pass
    refused = 0
    for case in WPT_REFUSED:
        try:
            canonicalize(case["input"], case["base"])
        except InvalidURL:
            refused += 1
    keys = {(c["input"], c["base"]) for c in WPT_HTTP}
    assert set(WPT_EXCEPTIONS) <= keys
    assert (agree, len(WPT_HTTP), refused, len(WPT_REFUSED)) == (244, 247, 644, 644)
    assert agree == len(WPT_HTTP) - len(WPT_EXCEPTIONS)


def _fast_equals_slow(url: str, base: str | None, rules: CanonicalRules) -> bool:
    """The fast path's answer, when it gives one, is ada's: True if the fast path answered."""
    fast = _canonical(url, base, rules)
    if fast is None:
        return False
    assert fast == _slow(url, base, rules), (url, base, rules)
    return True


def test_wpt_fast_path_equals_ada() -> None:
    answered = 0
    for case in WPT:
        for base in {case["base"], None, WPT_BASE, "https://h.example:8080/a/b/?x=1"}:
            for rules in RULE_SETS:
                answered += _fast_equals_slow(case["input"], base, rules)
    assert answered > 1000  # the comparison is not vacuous


# -- examples -----------------------------------------------------------------------------------------------

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
    ("http://example.com./", None, DEFAULT_RULES, "http://example.com./"),  # another origin to a browser
    ("http://example.com/a/b/../../../c", None, DEFAULT_RULES, "http://example.com/c"),
    ("http://example.com/a/%2E%2e/b", None, DEFAULT_RULES, "http://example.com/b"),
    ("http://example.com/a/..", None, DEFAULT_RULES, "http://example.com/"),
    ("http://example.com/a/.hidden/..x", None, DEFAULT_RULES, "http://example.com/a/.hidden/..x"),
    ("http://example.com/%7euser/%41%2d%5F%30", None, DEFAULT_RULES, "http://example.com/~user/A-_0"),
    ("http://example.com/a%2fb%3a%c3%bc", None, DEFAULT_RULES, "http://example.com/a%2Fb%3A%C3%BC"),
    ("http://example.com/100%/%zz%4", None, DEFAULT_RULES, "http://example.com/100%/%zz%4"),  # sent as browsers do
    ("http://example.com/a b/<x>\"|^`{}\\", None, DEFAULT_RULES,
     "http://example.com/a%20b/%3Cx%3E%22|%5E%60%7B%7D/"),
    ("http://example.com/résumé", None, DEFAULT_RULES, "http://example.com/r%C3%A9sum%C3%A9"),
    ("http://example.com/\ud800?\udfff", None, DEFAULT_RULES, "http://example.com/%EF%BF%BD?%EF%BF%BD"),
    ("http://example.com/\ud83d\ude00", None, DEFAULT_RULES, "http://example.com/%F0%9F%98%80"),  # a UTF-16 pair
    ("http://" + "a." * 125 + "com./", None, DEFAULT_RULES, "http://" + "a." * 125 + "com./"),  # 253 + root
    ("http://example.com/r%c3%a9sum%C3%A9", None, DEFAULT_RULES, "http://example.com/r%C3%A9sum%C3%A9"),
    ("http://example.com/!$&'()*+,;=:@[]|", None, DEFAULT_RULES, "http://example.com/!$&'()*+,;=:@[]|"),
    ("http://bücher.example/", None, DEFAULT_RULES, "http://xn--bcher-kva.example/"),
    ("http://BÜCHER.Example:8080/", None, DEFAULT_RULES, "http://xn--bcher-kva.example:8080/"),
    ("http://例え.テスト/", None, DEFAULT_RULES, "http://xn--r8jz45g.xn--zckzah/"),
    ("http://[2001:DB8:0:0:1:0:0:1]/", None, DEFAULT_RULES, "http://[2001:db8::1:0:0:1]/"),
    ("http://[::1]:8080/x", None, DEFAULT_RULES, "http://[::1]:8080/x"),
    ("https://[::FFFF:1.2.3.4]:443/", None, DEFAULT_RULES, "https://[::ffff:102:304]/"),
    ("http://192.168.0.1:80/", None, DEFAULT_RULES, "http://192.168.0.1/"),
    ("  \t http://exa\nmple.com/a\r\nb \x00", None, DEFAULT_RULES, "http://example.com/ab"),
    ("http://example.com/#frag", None, DEFAULT_RULES, "http://example.com/"),
    ("http://example.com/p#Frag%7e x", None, FRAGMENT, "http://example.com/p#Frag~%20x"),
    ("http://example.com/p#", None, FRAGMENT, "http://example.com/p"),
    ("http://example.com/p#a#b`", None, FRAGMENT, "http://example.com/p#a#b%60"),
    ("http://example.com/?", None, DEFAULT_RULES, "http://example.com/"),
    ("http://example.com/?&&", None, DEFAULT_RULES, "http://example.com/"),
    ("http://example.com/?c=3&b=2&a=1", None, DEFAULT_RULES, "http://example.com/?a=1&b=2&c=3"),
    ("http://example.com/?b=2&a=9&b=1&a=8", None, DEFAULT_RULES, "http://example.com/?a=9&a=8&b=2&b=1"),
    ("http://example.com/?a-b=1&a=2", None, DEFAULT_RULES, "http://example.com/?a=2&a-b=1"),
    ("http://example.com/?c=3&b=2&&a=1", None, ALL_OFF, "http://example.com/?c=3&b=2&&a=1"),
    ("http://example.com/?q=a+b%20c d&x=%2f%7E", None, DEFAULT_RULES, "http://example.com/?q=a+b%20c%20d&x=%2F~"),
    ("http://example.com/?q=ü[]&a='", None, DEFAULT_RULES, "http://example.com/?a=%27&q=%C3%BC[]"),
    ("http://example.com/?q=/?:@\\{}", None, DEFAULT_RULES, "http://example.com/?q=/?:@\\{}"),
    ("http://example.com/x?utm_source=a&id=1&gclid=z&fbclid=y&UTM_Medium=b", None, STRIP, "http://example.com/x?id=1"),
    ("http://example.com/x?utm_source=a&id=1", None, DEFAULT_RULES, "http://example.com/x?id=1&utm_source=a"),
    ("http://example.com/x?JSESSIONID=1&PHPSESSID=2&sid=3&page=4", None, STRIP, "http://example.com/x?page=4"),
    ("http://example.com/shop;jsessionid=A1B2/item.jsp;JSESSIONID=C3?id=1&sessionid=9", None, STRIP,
     "http://example.com/shop/item.jsp?id=1"),
    ("http://example.com/item.jsp;jsessionid=C3", None, DEFAULT_RULES, "http://example.com/item.jsp;jsessionid=C3"),
    ("http://example.com/x?utm_source=a", None, STRIP, "http://example.com/x"),
    ("http://example.com/a/..;jsessionid=1/b", None, STRIP, "http://example.com/b"),  # no dot segment left behind
    # what the WHATWG standard changed: each as a browser resolves it
    ("\\x", WPT_BASE, DEFAULT_RULES, "http://example.org/x"),
    ("\\\\x\\hello", WPT_BASE, DEFAULT_RULES, "http://x/hello"),
    ("https://faß.ExAmPlE/", None, DEFAULT_RULES, "https://xn--fa-hia.example/"),  # UTS 46, not IDNA 2003 "fass"
    ("http://ς.example/", None, DEFAULT_RULES, "http://xn--3xa.example/"),  # final sigma kept (not "σ")
    ("http://\u0915\u094d\u200d\u0937.example/", None, DEFAULT_RULES, "http://xn--11b2ezcw70k.example/"),  # ZWJ kept
    ("http://192.0x00A80001", None, DEFAULT_RULES, "http://192.168.0.1/"),
    ("http://0x7f.1/", None, DEFAULT_RULES, "http://127.0.0.1/"),
    ("http://0300.0250.0.1/", None, DEFAULT_RULES, "http://192.168.0.1/"),
    ("http://3232235521/", None, DEFAULT_RULES, "http://192.168.0.1/"),
    ("https:example.com/", WPT_BASE, DEFAULT_RULES, "https://example.com/"),
    ("https:g", RFC_BASE, DEFAULT_RULES, "https://g/"),
    ("///host/x", "http://example.org/", DEFAULT_RULES, "http://host/x"),
    ("http:@www.example.com", None, DEFAULT_RULES, "http://www.example.com/"),
    ("https://%e2%98%83", None, DEFAULT_RULES, "https://xn--n3h/"),
    ("http://ex%41mple.com/", None, DEFAULT_RULES, "http://example.com/"),
    ("http:path", None, DEFAULT_RULES, "http://path/"),
    ("http:/x", WPT_BASE, DEFAULT_RULES, "http://example.org/x"),  # same scheme as the base: a relative path
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
    ("http:g", RFC_BASE, DEFAULT_RULES, "http://a/b/c/g"),
    # other bases and references
    ("page2.html", "https://Example.com", DEFAULT_RULES, "https://example.com/page2.html"),
    ("?page=2", "https://example.com/list?page=1#top", DEFAULT_RULES, "https://example.com/list?page=2"),
    ("#top", "https://example.com/list?b=1&a=2", DEFAULT_RULES, "https://example.com/list?a=2&b=1"),
    ("//cdn.example.net/x.js", "https://example.com/", DEFAULT_RULES, "https://cdn.example.net/x.js"),
    ("HTTPS://Other.example/", "http://example.com/a/", DEFAULT_RULES, "https://other.example/"),
    ("  ../b c  ", "http://example.com/a/x/y", DEFAULT_RULES, "http://example.com/a/b%20c"),
    ("x", "http://user:pw@example.com:8080/a/b", DEFAULT_RULES, "http://example.com:8080/a/x"),
    ("x", " HTTP://Example.com/a/../b/", DEFAULT_RULES, "http://example.com/b/x"),
]


@pytest.mark.parametrize(("url", "base", "rules", "expected"), EXAMPLES)
def test_examples(url: str, base: str | None, rules: CanonicalRules, expected: str) -> None:
    assert canonicalize(url, base, rules) == expected
    assert canonicalize(expected, rules=rules) == expected
    assert normalize_url(expected) == expected  # a canonical URL is a WHATWG URL as it stands


INVALID = [
    ("javascript:void(0)", None, "unsupported scheme"),
    ("JavaScript:alert(1)", RFC_BASE, "unsupported scheme"),
    ("mailto:someone@example.com", RFC_BASE, "unsupported scheme"),
    ("data:text/plain,hi", None, "unsupported scheme"),
    ("ftp://example.com/file", None, "unsupported scheme"),
    ("tel:+123", RFC_BASE, "unsupported scheme"),
    ("//example.com/x", "ftp://example.com/", "base is not an absolute http(s) URL"),
    ("http://example.com:99999/", None, "invalid port"),
    ("http://example.com:65536/", None, "invalid port"),
    ("http://example.com:8o/", None, "invalid port"),
    ("http://example.com:80:80/", None, "invalid port"),
    ("http://example.com:٨٠/", None, "invalid port"),
    ("http://example.com:" + "9" * 5000 + "/", None, "invalid port"),
    ("http://", None, "empty host"),
    ("http:///", None, "empty host"),
    ("http://:80/", None, "empty host"),
    ("http://user@/", None, "empty host"),
    ("http://.../", None, "invalid host"),
    ("http://exa mple.com/", None, "invalid host"),
    ("http://a..b/", None, "invalid host"),
    ("http://example.com../", None, "invalid host"),
    ("http://[::1/", None, "invalid host"),
    ("http://[::1]x/", None, "invalid host"),
    ("http://[fe80::1%25eth0]/", None, "invalid host"),
    ("http://[1:2:3]/", None, "invalid host"),
    ("http://a\u200db.example/", None, "invalid host"),  # ZWJ outside a virama context (CheckJoiners)
    ("http://1.2.3.08", None, "invalid host"),  # what a browser refuses is refused
    ("http://256.256.256.256", None, "invalid host"),
    ("http://foo.09", None, "invalid host"),
    ("http://0x100000000/", None, "invalid host"),
    ("http://" + "ü" * 70 + ".com/", None, "invalid host"),
    ("http://" + "a" * 64 + ".com/", None, "invalid host"),
    ("http://" + "a." * 126 + "com/", None, "invalid host"),  # 255 characters
    ("http://" + "ü." * 126 + "com/", None, "invalid host"),
    ("http://\ud800.com/", None, "invalid host"),
    ("", None, "relative URL without a base"),
    ("/path", None, "relative URL without a base"),
    ("//example.com/x", None, "relative URL without a base"),
    ("g", "mailto:x@y", "base is not an absolute http(s) URL"),
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
    assert canonicalize("http://example.com/", "mailto:x@y") == "http://example.com/"


FAST = [  # (url, base): the common shapes must take the fast path
    ("http://example.com/", None),
    ("HTTPS://WWW.Example.COM:443/a/./b/../c%7e?b=2&a=1#top", None),
    ("http://127.0.0.1:8080/x?y", None),
    ("https://example.com/wiki/File:X.jpg", None),
    ("/a/b", "https://example.com/x/y?q=1"),
    ("../c/d.html?e=f", "https://example.com/x/y/"),
    ("page.html", "https://xn--bcher-kva.example:8443/dir/"),
    ("//cdn.example.net/s.js", "https://example.com/"),
    ("", "https://example.com/x?b=1"),
    ("#frag", "https://example.com/x"),
    ("?q=1", "https://example.com/x"),
]


@pytest.mark.parametrize(("url", "base"), FAST)
def test_fast_path_taken(url: str, base: str | None) -> None:
    assert _fast_equals_slow(url, base, DEFAULT_RULES)


def test_rules_are_checked_and_tagged() -> None:
    with pytest.raises(ConfigError) as info:
        CanonicalRules(sort_query="yes")  # type: ignore[arg-type]
    assert info.value.key == "sort_query"
    assert CANONICAL_VERSION == 2
    assert DEFAULT_RULES.version_tag() == "canon2+sort_query"
    assert CanonicalRules(sort_query=False).version_tag() == "canon2"
    tags = {
        CanonicalRules(sort_query=a, strip_session_ids=b, strip_tracking=c, keep_fragment=d).version_tag()
        for a in (False, True) for b in (False, True) for c in (False, True) for d in (False, True)
    }
    assert len(tags) == 16


def test_data_dir_of_older_rules_refuses_to_resume(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "state"
    monkeypatch.setattr(frontier.url.canonical, "CANONICAL_VERSION", 1)
    with URLSeen(path, capacity=1000, error_rate=1e-6) as seen:
        seen.add("http://example.com/")
    monkeypatch.undo()
    with pytest.raises(VersionMismatch) as info:
        URLSeen(path, capacity=1000, error_rate=1e-6)
    message = str(info.value)
    assert "'canon1+sort_query'" in message and "'canon2+sort_query'" in message
    assert str(path) in message and "new data dir" in message


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


@pytest.mark.parametrize(("url", "scheme"), [("HTTP://x/", "http"), (" \tJava\nScript:alert(1)", "javascript"),
                                             ("a+b.c-d:x", "a+b.c-d"), ("/a:b", None), ("1a:b", None), ("", None)])
def test_scheme_of(url: str, scheme: str | None) -> None:
    assert scheme_of(url) == scheme


# w3lib as a peer, on URLs where its output is the standard's: no dot-segments or default ports (w3lib
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
name_st = st.text("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ", min_size=1, max_size=1)
# The last label starts with a letter: a host name, never a number form.
ascii_host_st = st.builds(lambda labels, first, rest: ".".join([*labels, first + rest]),
                          st.lists(label_st, max_size=3), name_st, st.text(UNRESERVED[:62] + "-_", max_size=8))
piece_st = st.one_of(
    st.sampled_from([".", "..", "%", "%2e", "%2E", ".%2e", "%2F", "%7e", "%zz", "%C3%BC", "a", "B", ";jsessionid=x",
                     "=", "&", "?", "#", "/", "//", " ", "+", "ü", "€", "\t", "\n", "utm_source", "sid", ":", "@",
                     "[", "]", "\\", "^", "`", "{", "}", "|", "'", '"', "<", ">", "\x00", "\x7f", "\ud800"]),
    st.text(max_size=4),
)
chunk_st = st.lists(piece_st, max_size=8).map("".join)
# Hosts the fast path takes, and hosts only the standard knows what to do with.
host_st = st.one_of(
    ascii_host_st,
    st.sampled_from(["127.0.0.1", "255.255.255.255", "0x7f.1", "1.2.3.08", "256.1.1.1", "1.2.3", "09.1", "foo.0x4",
                     "foo.123", "example.com.", "a..b", "xn--bcher-kva.example", "xn--a.com", "XN--BCHER-KVA.de",
                     "ex%41mple.com", "faß.de", "bücher.example", "[::1]", "[0:0::1]", "[::ffff:1.2.3.4]", "",
                     "a" * 64 + ".com", "a_b.c-d", "-x.y", "ｅｘａｍｐｌｅ.com", "exa mple.com", "a%2eb"]),
)
port_st = st.sampled_from(["", "", ":", ":80", ":443", ":080", ":8080", ":65535", ":65536", ":0", ":00000", ":x"])


@st.composite
def absolute_st(draw: st.DrawFn) -> str:
    scheme = draw(st.sampled_from(["http", "https", "HTTP", "hTtPs", "ftp", "javascript"]))
    sep = draw(st.sampled_from(["://", "://", "://", ":", ":/", ":///", ":\\\\", "\\\\"]))
    url = scheme + sep + draw(st.sampled_from(["", "", "", "u@", "u:p@", "@", ":@"])) + draw(host_st) + draw(port_st)
    if draw(st.booleans()):
        url += draw(st.sampled_from(["/", "\\"])) + draw(chunk_st)
    if draw(st.booleans()):
        url += "?" + draw(chunk_st)
    if draw(st.booleans()):
        url += "#" + draw(chunk_st)
    return draw(st.sampled_from(["", "", " ", "\t"])) + url


reference_st = st.one_of(
    absolute_st(),
    chunk_st,
    st.builds(lambda p, c: p + c, st.sampled_from(["/", "//", "///", "\\", "?", "#", "./", "../", ""]), chunk_st),
    st.builds(lambda h, c: "//" + h + "/" + c, host_st, chunk_st),
)


def _canonical_or_none(url: str) -> str | None:
    try:
        return canonicalize(url)
    except InvalidURL:
        return None


base_st = st.one_of(st.none(), absolute_st(), absolute_st().map(_canonical_or_none),
                    st.sampled_from([WPT_BASE, RFC_BASE, "https://h.example:8080/a/b/?x=1", "mailto:x@y", "not a url"]))


@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(reference_st, base_st, rules_st)
def test_fast_path_equals_ada(url: str, base: str | None, rules: CanonicalRules) -> None:
    _fast_equals_slow(url, base, rules)


# Mostly what the fast path takes (so most examples compare the two paths), with its edge cases.
plain_piece_st = st.sampled_from([".", "..", "%2e", "%2E", ".%2e", "%7e", "%41", "%2F", "%zz", "%", "%C3%bc", "a", "B",
                                  "0", ";jsessionid=x", ";", "=", "&", "?", "/", "//", "+", ":", "@", "[", "]", "|",
                                  "'", "!", "$", "~", "-", "_", "utm_source=1", "sid=2", "k=v", "a=1&b=2", "#"])
plain_chunk_st = st.lists(plain_piece_st, max_size=10).map("".join)
plain_host_st = st.one_of(ascii_host_st, st.sampled_from(["127.0.0.1", "10.0.0.255", "1.2.3.4", "xn--bcher-kva.de"]))


@st.composite
def plain_reference_st(draw: st.DrawFn) -> str:
    kind = draw(st.sampled_from(["absolute", "scheme-relative", "path-absolute", "path-relative", "query", ""]))
    ref = draw(plain_chunk_st)
    if kind == "absolute":
        return (draw(st.sampled_from(["http", "https", "HTTP", "Https"])) + "://" + draw(plain_host_st)
                + draw(port_st) + draw(st.sampled_from(["", "/", "?", "#"])) + ref)
    if kind == "scheme-relative":
        return "//" + draw(plain_host_st) + draw(port_st) + "/" + ref
    return {"path-absolute": "/", "query": "?"}.get(kind, "") + ref


# A plain URL with one character at the edge of the alphabets put in somewhere.
edged_st = st.builds(lambda url, ch, at: url[:at] + ch + url[at:], plain_reference_st(),
                     st.sampled_from(list("\"'<>\\^`{}|[]#?% ")), st.integers(0, 120))


plain_base_st = st.one_of(plain_reference_st().map(_canonical_or_none),
                          st.sampled_from([WPT_BASE, RFC_BASE, "https://h.example:8080/a/b/?x=1"]))


@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(plain_reference_st(), edged_st), plain_base_st, rules_st)
def test_fast_path_equals_ada_on_plain_urls(url: str, base: str | None, rules: CanonicalRules) -> None:
    _fast_equals_slow(url, base, rules)


def _checked_equals_unchecked(url: str, base: str | None, rules: CanonicalRules) -> None:
    """A chunk's character check lets the fast path skip its own: same answer when it passes."""
    if _checked([url]):
        assert _canonical(url, base, rules, True) == _canonical(url, base, rules), (url, base, rules)


@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(reference_st, plain_reference_st(), edged_st), st.one_of(base_st, plain_base_st), rules_st)
def test_checked_chunk_skips_nothing(url: str, base: str | None, rules: CanonicalRules) -> None:
    _checked_equals_unchecked(url, base, rules)


def test_wpt_checked_chunk_skips_nothing() -> None:
    for case in WPT:
        for base in {case["base"], None, WPT_BASE}:
            for rules in RULE_SETS:
                _checked_equals_unchecked(case["input"], base, rules)


def _one_by_one(urls: list, base: str | None, rules: CanonicalRules) -> list[str | None]:
    out = []
    for url in urls:
        try:
            out.append(canonicalize(url, base, rules))
        except InvalidURL:
            out.append(None)
    return out


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(plain_reference_st(), reference_st, st.sampled_from([None, b"http://x/", 7])), max_size=150),
       st.one_of(base_st, plain_base_st), rules_st)
def test_canonicalize_many_is_canonicalize_one_by_one(urls: list, base: str | None, rules: CanonicalRules) -> None:
    assert canonicalize_many(urls, base, rules) == _one_by_one(urls, base, rules)
    assert canonicalize_many(tuple(urls), base, rules) == _one_by_one(urls, base, rules)


def test_canonicalize_many_examples() -> None:
    page = "https://example.com/dir/page.html?b=1"
    urls = ["x.html", "/y?b=2&a=1", "javascript:void(0)", "HTTP://Other.org:80/./z", "", "http://exa mple.com/", "\\\\w"]
    assert canonicalize_many(urls, page) == [
        "https://example.com/dir/x.html", "https://example.com/y?a=1&b=2", None, "http://other.org/z",
        "https://example.com/dir/page.html?b=1", None, "https://w/"]
    assert canonicalize_many([]) == []
    assert canonicalize_many(["/rel"]) == [None]  # no base
    with pytest.raises(InvalidURL, match="base is not a string"):
        canonicalize_many(["x"], b"http://example.com/")  # type: ignore[arg-type]


def test_origin_memo_changes_no_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    """The memo of canonical origins is bounded, and its state (empty, full, cleared) changes no answer."""
    urls = [f"{s}://{h}{p}/a/./b?y=1&x=2" for s in ("http", "HTTPS", "Http") for h in ("Ex.com", "ex.com", "1.2.3.4")
            for p in ("", ":80", ":443", ":08080", ":99999")] + ["http://xn--bcher-kva.example/", "http:x"]
    expected = [_slow_or_none(u) for u in urls]
    monkeypatch.setattr(frontier.url.canonical, "_ORIGINS", {})
    monkeypatch.setattr(frontier.url.canonical, "_ORIGINS_MAX", 4)
    for _ in range(3):
        assert [_canonical(u, None, DEFAULT_RULES) or _slow_or_none(u) for u in urls] == expected
        assert canonicalize_many(urls) == expected
        assert len(frontier.url.canonical._ORIGINS) <= 4


def _slow_or_none(url: str) -> str | None:
    try:
        return _slow(url, None, DEFAULT_RULES)
    except InvalidURL:
        return None


def check_output(out: str, rules: CanonicalRules) -> None:
    assert out.startswith(("http://", "https://"))
    assert out.isascii() and out.isprintable() and " " not in out
    assert "#" not in out or rules.keep_fragment
    assert canonicalize(out, rules=rules) == out
    assert normalize_url(out) == out


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(reference_st, base_st, rules_st)
def test_output_is_an_idempotent_whatwg_url(url: str, base: str | None, rules: CanonicalRules) -> None:
    try:
        out = canonicalize(url, base, rules)
    except InvalidURL:
        return
    check_output(out, rules)


@settings(max_examples=300, deadline=None)
@given(st.text(), st.one_of(st.none(), st.text(), st.just(RFC_BASE)), rules_st)
def test_any_text_raises_only_invalid_url(text: str, base: str | None, rules: CanonicalRules) -> None:
    try:
        out = canonicalize(text, base, rules)
    except InvalidURL:
        return
    check_output(out, rules)


@st.composite
def url_parts(draw: st.DrawFn) -> tuple[str, str, str]:
    """(url, scheme, expected url_host) for URL-shaped strings."""
    scheme = draw(st.sampled_from(["http", "https", "HTTP", "Https"]))
    host = draw(ascii_host_st)
    port = draw(st.none() | st.integers(0, 65535))
    user = draw(st.sampled_from(["", "user@", "u:p@"]))
    netloc = user + host + ("" if port is None else f":{port}")
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


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(url_parts(), rules_st)
def test_url_shaped(parts: tuple[str, str, str], rules: CanonicalRules) -> None:
    url, scheme, expected_host = parts
    out = canonicalize(url, rules=rules)  # an ASCII host name and a valid port never raise
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
    if not re.match(r"[/\\]{2}|[A-Za-z][A-Za-z0-9+.\-]*:", cleaned):
        assert url_host(out) == parts[2]  # a relative reference keeps the base's host


@st.composite
def equivalent_spellings(draw: st.DrawFn) -> tuple[str, str]:
    """(canonical URL, another spelling of it that the standard or a dedup rule makes equal)."""
    scheme = draw(st.sampled_from(["http", "https"]))
    host = draw(st.lists(st.text("abcdefghijklmnopqrstuvwxyz0123456789", min_size=1, max_size=8),
                         min_size=1, max_size=3).map(lambda labels: ".".join("h" + label for label in labels)))
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
        path += draw(st.sampled_from(["", "/.", "/x/..", "/%2E", "/x/%2e%2E", "\\.", "/x\\.."]))
        path += draw(st.sampled_from(["/", "\\"])) + respell(seg)
    if not segments:  # the empty path and the root
        path = draw(st.sampled_from(["", "/", "/.", "/x/..", "/./", "/%2e/", "\\"]))
    shuffled = draw(st.permutations(params))
    query = "&".join(respell(k) + "=" + respell(v) for k, v in shuffled) or draw(st.sampled_from(["", "?"]))
    port = draw(st.sampled_from(["", ":", ":80" if scheme == "http" else ":443", ":0000"]))
    variant = (draw(st.sampled_from([scheme, scheme.upper(), scheme.title()])) + draw(st.sampled_from(["://", ":\\\\"]))
               + draw(st.sampled_from(["", "user:pw@"])) + draw(st.sampled_from([host, host.upper()]))
               + (port if port != ":0000" else ":" + str(80 if scheme == "http" else 443).zfill(6))
               + path + ("?" + query if shuffled else query) + draw(st.sampled_from(["", "#", "#frag"])))
    return canonical, variant


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(equivalent_spellings())
def test_equivalent_spellings_meet(pair: tuple[str, str]) -> None:
    canonical, variant = pair
    assert canonicalize(canonical) == canonical
    assert canonicalize(variant) == canonical


@settings(max_examples=200, deadline=None)
@given(st.text(st.characters(codec="utf-8", exclude_characters="/?#@:[]\\"), min_size=1, max_size=20))
def test_unicode_hosts_punycode_or_invalid(host: str) -> None:
    try:
        out = canonicalize(f"http://{host}/")
    except InvalidURL as exc:
        assert exc.reason in ("invalid host", "empty host")
        return
    assert url_host(out) == url_host(canonicalize(out))
    assert url_host(out).isascii()
    assert url_host(out).islower() or not any(c.isalpha() for c in url_host(out))


@pytest.mark.parametrize(
    "url",
    [
        "http://example.com/" + "./" * 200_000,
        "http://example.com/" + "a/../" * 100_000,
        "http://example.com/" + "%" * 300_000,
        "http://example.com/" + "%2e%2E/" * 50_000,
        "http://example.com/" + "\\.." * 100_000,
        "http://example.com/?" + "b=1&a=2&" * 50_000,
        "http://example.com/" + "ü" * 200_000,
        "http://" + "a." * 100_000 + "com/",
        "http://" + "a" * 300_000,
        "http://" + "a" * 63 + "." + "b" * 300_000,
        "http://" + "".join(map(chr, range(0x4E00, 0x4E00 + 100_000))) + "/",  # punycode is quadratic
        "http://" + "1." * 100_000 + "1/",
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
