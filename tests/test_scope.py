"""frontier.scope: which canonical URLs the crawl may fetch, and the named reason when not."""

from __future__ import annotations

import pickle

import pytest
from hypothesis import given
from hypothesis import strategies as st

from frontier.canonical import canonicalize
from frontier.errors import ConfigError
from frontier.scope import Scope, is_private_host, normalize_domain, normalize_host, split_port

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
    ],
)
def test_bad_arguments(kwargs: dict, key: str) -> None:
    with pytest.raises(ConfigError) as err:
        Scope(**kwargs)
    assert err.value.key == key


def test_pickles_without_its_cache() -> None:
    scope = Scope(allowed_domains=["example.com"], include=["/a"], exclude=["/a/b"], max_url_length=100,
                  block_private=True)
    assert scope.check("http://example.com/a") is None  # fill the cache
    copy = pickle.loads(pickle.dumps(scope))
    assert copy == scope
    for url in ("http://example.com/a", "http://x.example.com/a/b", "http://example.com/c", "http://e.org/a"):
        assert copy.check(url) == scope.check(url)
    assert "example.com" in repr(scope)


def test_host_cache_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    import frontier.scope as scope_module

    monkeypatch.setattr(scope_module, "HOST_CACHE_SIZE", 10)
    scope = Scope(allowed_domains=["example.com"])
    for i in range(50):
        assert scope.allows(f"http://h{i}.example.com/")
    assert len(scope._host_cache) <= 10


LABEL = st.text(alphabet="abcdefgxyz0123-", min_size=1, max_size=6).filter(lambda s: s[0] != "-" and s[-1] != "-")


@given(st.lists(LABEL, min_size=1, max_size=4), st.lists(LABEL, min_size=1, max_size=4))
def test_domain_rule_matches_the_definition(host_labels: list[str], domain_labels: list[str]) -> None:
    host, domain = ".".join(host_labels), ".".join(domain_labels)
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
                                    "private_address")


def test_check_many_matches_check() -> None:
    urls = [url for _scope, url, _reason in CHECK_TABLE]
    for scope in (HOSTS, DOMAINS, PATTERNS):
        assert scope.check_many(urls) == [scope.check(url) for url in urls]
        assert scope.check_many(iter(urls)) == [scope.check(url) for url in urls]
