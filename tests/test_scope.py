"""frontier.url.scope: which canonical URLs the crawl may fetch, and the named reason when not."""

from __future__ import annotations

import pickle
import re

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from frontier.errors import ConfigError, InvalidURL
from frontier.url.canonical import canonicalize
from frontier.url.scope import Scope, has_repeated_run, is_private_host, normalize_domain, normalize_host, split_port

HOSTS = Scope(allowed_hosts=["example.com", "127.0.0.1:8081", "[::1]:8080"])
DOMAINS = Scope(allowed_domains=["example.org"])
PATTERNS = Scope(allowed_domains=["example.com"], include=[r"/docs/", r"\?page=\d+$"], exclude=[r"\.pdf$", "/private/"])

CHECK_TABLE = [
    # (scope, canonical URL, expected reason or None)
    (HOSTS, "http://example.com/", None),
    (HOSTS, "https://example.com/a?b=c", None),
    (HOSTS, "http://example.com:8080/", "out_of_scope"),  # hosts match with their port
    (HOSTS, "http://www.example.com/", "out_of_scope"),  # a host is not a domain
    (HOSTS, "http://127.0.0.1:8081/index.html", None),
    (HOSTS, "http://127.0.0.1:8082/index.html", "out_of_scope"),
    (HOSTS, "http://127.0.0.1/", "out_of_scope"),
    (HOSTS, "http://[::1]:8080/", None),
    (DOMAINS, "http://example.org/", None),
    (DOMAINS, "http://www.example.org/", None),
    (DOMAINS, "http://a.b.c.example.org:8443/x", None),  # domains admit any port
    (DOMAINS, "http://evilexample.org/", "out_of_scope"),  # a look-alike, not a subdomain
    (DOMAINS, "http://example.org.evil.net/", "out_of_scope"),
    (DOMAINS, "http://org/", "out_of_scope"),
    (DOMAINS, "http://example.com/", "out_of_scope"),
    (PATTERNS, "http://example.com/docs/intro", None),
    (PATTERNS, "http://www.example.com/list?page=3", None),
    (PATTERNS, "http://example.com/blog/post", "not_included"),
    (PATTERNS, "http://example.com/docs/manual.pdf", "excluded"),
    (PATTERNS, "http://example.com/docs/private/x", "excluded"),
    (PATTERNS, "http://other.net/docs/intro", "out_of_scope"),  # the host is checked before the patterns
    (Scope(), "http://anything.example/", None),  # no host rules: every host
    (Scope(allowed_domains=["*"]), "http://any.where:81/", None),
    (Scope(exclude=["logout"]), "http://a.example/logout?x=1", "excluded"),
    (Scope(include=["^https://"]), "http://a.example/", "not_included"),
    (Scope(include=["^https://"]), "https://a.example/", None),
    (Scope(max_url_length=30), "http://a.example/" + "x" * 13, None),  # exactly 30
    (Scope(max_url_length=30), "http://a.example/" + "x" * 14, "url_too_long"),
    (Scope(allowed_hosts=["x.example"], max_url_length=20), "http://y.example/" + "z" * 50, "url_too_long"),
    # path rules, on by default: more than 20 segments, a run of segments repeated more than twice
    (Scope(max_segment_repeats=None), "http://a.example/" + "s/" * 19 + "x.html", None),  # 20 segments
    (Scope(max_segment_repeats=None), "http://a.example/" + "s/" * 20 + "x.html", "too_many_segments"),
    (Scope(), "http://a.example/" + "".join(f"d{i}/" for i in range(19)) + "x", None),
    (Scope(), "http://a.example/" + "".join(f"d{i}/" for i in range(20)) + "x", "too_many_segments"),
    (Scope(), "http://a.example/" + "".join(f"d{i}/" for i in range(20)), "too_many_segments"),  # "/" ends one too
    (Scope(), "http://a.example/a?" + "/" * 40, None),  # the query does not count
    (Scope(), "http://a.example/docs/sub/sub/", None),
    (Scope(), "http://a.example/docs/sub/sub/sub/", "repeated_segment"),
    (Scope(), "http://a.example/docs/sub/sub/sub/page.html", "repeated_segment"),
    (Scope(), "http://a.example/docs/sub/sub/sub", None),  # Heritrix's regex needs the "/" after each copy
    (Scope(), "http://a.example/mirror/a/b/a/b/a/", None),
    (Scope(), "http://a.example/mirror/a/b/a/b/a/b/", "repeated_segment"),  # a run of two, three times
    (Scope(), "http://a.example/a/x/a/y/a/z/", None),  # repeated, but never back to back
    (Scope(), "http://a.example/a//////b", "repeated_segment"),  # empty segments repeat too
    (Scope(), "http://a.example/x?p=/a/a/a/a/", None),
    (Scope(max_segment_repeats=3), "http://a.example/s/s/s/", None),
    (Scope(max_segment_repeats=3), "http://a.example/s/s/s/s/", "repeated_segment"),
    (Scope(max_segment_repeats=1), "http://a.example/s/s/", "repeated_segment"),
    (Scope(max_segment_repeats=0), "http://a.example/s/s/s/s/", None),  # 0 and None turn a rule off
    (Scope(max_path_segments=0), "http://a.example/" + "".join(f"d{i}/" for i in range(40)), None),
    (Scope(max_path_segments=2), "http://a.example/a/b", None),
    (Scope(max_path_segments=2), "http://a.example/a/b/", "too_many_segments"),
    (Scope(max_url_length=30), "http://a.example/s/s/s/s/s/s/s/s/s/", "url_too_long"),  # length first
    (Scope(allowed_hosts=["x.example"]), "http://a.example/s/s/s/", "out_of_scope"),  # then the host
    (Scope(exclude=["/s/"]), "http://a.example/s/s/s/", "repeated_segment"),  # then the path, then patterns
]


@pytest.mark.parametrize(("scope", "url", "reason"), CHECK_TABLE)
def test_check_table(scope: Scope, url: str, reason: str | None) -> None:
    assert scope.check(url) == reason
    assert scope.allows(url) is (reason is None)
    assert scope.check(url) == reason  # again, from the host cache


def test_table_urls_are_canonical() -> None:
    for _scope, url, _reason in CHECK_TABLE:
        assert canonicalize(url) == url


@pytest.mark.parametrize(
    ("host", "private"),
    [
        ("127.0.0.1", True),
        ("127.8.9.10", True),
        ("10.1.2.3", True),
        ("172.16.0.1", True),
        ("192.168.1.1", True),
        ("169.254.169.254", True),  # link-local: cloud metadata
        ("100.64.0.1", True),  # shared address space (carrier NAT)
        ("0.0.0.0", True),
        ("224.0.0.1", True),  # multicast
        ("240.0.0.1", True),  # reserved
        ("255.255.255.255", True),
        ("[::1]", True),
        ("[::]", True),
        ("[fe80::1]", True),
        ("[fc00::1]", True),
        ("[::ffff:10.0.0.1]", True),  # IPv4-mapped private
        ("[::ffff:8.8.8.8]", False),  # IPv4-mapped public
        ("127.1", True),  # short and numeric IPv4 spellings a resolver accepts
        ("2130706433", True),
        ("0x7f.1", True),
        ("localhost", True),
        ("foo.localhost", True),
        ("8.8.8.8", False),
        ("93.184.216.34", False),
        ("[2606:4700:4700::1111]", False),
        ("example.com", False),
        ("bad.cafe", False),  # hex letters, but a name
        ("localhost.example.com", False),
        ("10.example", False),
    ],
)
def test_is_private_host(host: str, private: bool) -> None:
    assert is_private_host(host) is private


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("http://127.0.0.1/", "private_address"),
        ("http://127.0.0.1:8081/x", "private_address"),
        ("http://10.0.0.7/", "private_address"),
        ("http://[::1]:8080/", "private_address"),
        ("http://localhost:3000/", "private_address"),
        ("http://8.8.8.8/", None),
        ("https://93.184.216.34:8443/", None),
        ("http://example.com/", None),
    ],
)
def test_block_private(url: str, reason: str | None) -> None:
    assert canonicalize(url) == url
    assert Scope(block_private=True).check(url) == reason
    assert Scope(block_private=False).check(url) is None


def test_block_private_after_host_rules() -> None:
    scope = Scope(allowed_hosts=["127.0.0.1:8081"], block_private=True)
    assert scope.check("http://127.0.0.1:8081/") == "private_address"
    assert scope.check("http://127.0.0.1:9999/") == "out_of_scope"


def test_host_and_domain_entries_are_normalised() -> None:
    scope = Scope(allowed_hosts=["EXAMPLE.com:80", "Secure.Example.com:443", "Bücher.example"],
                  allowed_domains=[".Example.NET", "*.example.info"])
    assert scope.allows("http://example.com/")
    assert scope.allows("https://secure.example.com/")
    assert scope.allows("http://xn--bcher-kva.example/")
    assert scope.allows("http://www.example.net/")
    assert scope.allows("http://example.info/")
    assert normalize_host("[0:0:0:0:0:0:0:1]:8080") == "[::1]:8080"
    assert normalize_domain("*") == "*"
    assert split_port("[::1]:8080") == ("[::1]", ":8080")
    assert split_port("example.com") == ("example.com", "")


@pytest.mark.parametrize(
    ("kwargs", "key"),
    [
        ({"allowed_hosts": "example.com"}, "allowed_hosts"),
        ({"allowed_hosts": ["http://example.com/"]}, "allowed_hosts[0]"),
        ({"allowed_hosts": ["ok.example", "a b"]}, "allowed_hosts[1]"),
        ({"allowed_hosts": ["example.com:99999"]}, "allowed_hosts[0]"),
        ({"allowed_domains": ["example.com:80"]}, "allowed_domains[0]"),
        ({"allowed_domains": [""]}, "allowed_domains[0]"),
        ({"include": ["ok", "("]}, "include[1]"),
        ({"exclude": ["*bad"]}, "exclude[0]"),
        ({"max_url_length": 0}, "max_url_length"),
        ({"max_url_length": True}, "max_url_length"),
        ({"block_private": "yes"}, "block_private"),
        ({"max_path_segments": -1}, "max_path_segments"),
        ({"max_path_segments": True}, "max_path_segments"),
        ({"max_path_segments": "20"}, "max_path_segments"),
        ({"max_segment_repeats": 2.5}, "max_segment_repeats"),
    ],
)
def test_bad_arguments(kwargs: dict, key: str) -> None:
    with pytest.raises(ConfigError) as err:
        Scope(**kwargs)
    assert err.value.key == key


def test_pickles_without_its_cache() -> None:
    scope = Scope(allowed_domains=["example.com"], include=["/a"], exclude=["/a/b"], max_url_length=100,
                  block_private=True, max_path_segments=5, max_segment_repeats=None)
    assert scope.check("http://example.com/a") is None  # fill the cache
    copy = pickle.loads(pickle.dumps(scope))
    assert copy == scope
    for url in ("http://example.com/a", "http://x.example.com/a/b", "http://example.com/c", "http://e.org/a",
                "http://example.com/a/a/a/a/", "http://example.com/a/b/c/d/e/f"):
        assert copy.check(url) == scope.check(url)
    assert copy != Scope(allowed_domains=["example.com"], include=["/a"], exclude=["/a/b"], max_url_length=100,
                         block_private=True)
    assert "example.com" in repr(scope)


def test_host_cache_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    import frontier.url.scope as scope_module

    monkeypatch.setattr(scope_module, "HOST_CACHE_SIZE", 10)
    scope = Scope(allowed_domains=["example.com"])
    for i in range(50):
        assert scope.allows(f"http://h{i}.example.com/")
    assert len(scope._host_cache) <= 10


def is_canonical(url: str) -> bool:
    try:
        return canonicalize(url) == url
    except InvalidURL:
        return False


LABEL = st.text(alphabet="abcdefgxyz0123-", min_size=1, max_size=6).filter(lambda s: s[0] != "-" and s[-1] != "-")


@given(st.lists(LABEL, min_size=1, max_size=4), st.lists(LABEL, min_size=1, max_size=4))
def test_domain_rule_matches_the_definition(host_labels: list[str], domain_labels: list[str]) -> None:
    host, domain = ".".join(host_labels), ".".join(domain_labels)
    assume(is_canonical(f"http://{host}/") and is_canonical(f"http://{domain}/"))  # "0" is 0.0.0.0
    expected = host == domain or host.endswith("." + domain)
    assert Scope(allowed_domains=[domain]).allows(f"http://{host}/") is expected
    assert Scope(allowed_domains=[domain]).allows(f"http://{host}:8080/") is expected


@given(st.text(max_size=60))
def test_check_never_raises_on_canonical_urls(tail: str) -> None:
    try:
        url = canonicalize("http://example.com/" + tail)
    except ValueError:
        return
    for scope in (HOSTS, DOMAINS, PATTERNS, Scope(block_private=True, max_url_length=40)):
        assert scope.check(url) in (None, "out_of_scope", "excluded", "not_included", "url_too_long",
                                    "private_address", "too_many_segments", "repeated_segment")


def test_check_many_matches_check() -> None:
    urls = [url for _scope, url, _reason in CHECK_TABLE]
    for scope in (HOSTS, DOMAINS, PATTERNS):
        assert scope.check_many(urls) == [scope.check(url) for url in urls]
        assert scope.check_many(iter(urls)) == [scope.check(url) for url in urls]


# --- the path rules -----------------------------------------------------------------------------


def repeated_run_reference(segments: list[str], max_repeats: int) -> bool:
    """By the definition: some run segments[i:i+k] followed by max_repeats more copies of itself."""
    n = len(segments)
    return any(segments[i : i + k * (max_repeats + 1)] == segments[i : i + k] * (max_repeats + 1)
               for k in range(1, n + 1) for i in range(n - k * (max_repeats + 1) + 1))


@given(st.lists(st.sampled_from(["a", "b", "c", ""]), max_size=14), st.integers(min_value=1, max_value=4))
def test_has_repeated_run_matches_the_definition(segments: list[str], max_repeats: int) -> None:
    assert has_repeated_run(segments, max_repeats) is repeated_run_reference(segments, max_repeats)


HERITRIX_PATHOLOGICAL = re.compile(r".*?/(.*?/)\1{2,}.*", re.S)  # PathologicalPathDecideRule, maxRepetitions=2


@given(st.lists(st.sampled_from(["a", "b", "ab", ""]), min_size=1, max_size=12), st.booleans())
def test_repeated_segment_is_heritrix_pathological_path_on_the_path(segments: list[str], slash: bool) -> None:
    """Heritrix matches its regex against the whole URI; here it is the path only (the query is not searched)."""
    path = "/" + "/".join(segments) + ("/" if slash else "")
    url = "http://a.example" + path
    assume(is_canonical(url))
    expected = "repeated_segment" if HERITRIX_PATHOLOGICAL.fullmatch(path) else None
    assert Scope(max_path_segments=None).check(url) == expected


@given(st.integers(min_value=0, max_value=40), st.text(alphabet="ab/", max_size=30))
def test_too_many_segments_counts_the_slashes_of_the_path(segments: int, query: str) -> None:
    path = "".join(f"/s{i}" for i in range(segments)) or "/"
    url = canonicalize("http://a.example" + path + ("?" + query if query else ""))
    expected = "too_many_segments" if max(segments, 1) > 20 else None
    assert Scope().check(url) == expected


def test_path_rules_are_on_by_default_and_each_turns_off() -> None:
    deep = "http://a.example/" + "".join(f"d{i}/" for i in range(30))
    loop = "http://a.example/x/sub/sub/sub/"
    assert Scope().check(deep) == "too_many_segments"
    assert Scope().check(loop) == "repeated_segment"
    for off in (None, 0):
        assert Scope(max_path_segments=off).check(deep) is None
        assert Scope(max_segment_repeats=off).check(loop) is None
