"""The politeness key of a host: which queue group its fetches share a delay and an in-flight cap with.

    group_key("a.example.org:8080", "domain")          -> "example.org"
    group_key("a.example.org", "ip", "10.0.0.7")       -> "10.0.0.7"
    group_key("a.example.org", "ip")                   -> "a.example.org"   (address not learnt yet)

`host` (the default) keys each host ("name[:port]") on its own. `domain` keys it by its registered domain under
the Public Suffix List's ICANN section (the snapshot bundled with tldextract, never fetched at run time): the
private section would make each `*.blogspot.com` name a domain of its own, which is what sharing a server's
delay must not do. A name with no registered domain (`localhost`, an IP literal) is its own group. `ip` keys it
by the address its fetches connected to, the host itself until one is known (Heritrix's IP policy waits in the
host's queue the same way); an IP literal host is its own address.
"""

from __future__ import annotations

import ipaddress
from functools import lru_cache
from typing import Any

QUEUE_BY = ("host", "domain", "ip")
_extractor: Any = None


def host_name(host: str) -> str:
    """The name of a "name[:port]" host, without the port or an IPv6 literal's brackets."""
    if host.startswith("["):
        return host[1:host.index("]")] if "]" in host else host[1:]
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def ip_literal(host: str) -> str | None:
    """The address of a host that is an IP literal, else None."""
    try:
        return str(ipaddress.ip_address(host_name(host)))
    except ValueError:
        return None


@lru_cache(maxsize=65536)
def registered_domain(host: str) -> str:
    """The host's registered domain (ICANN section of the bundled Public Suffix List); the name itself if none."""
    global _extractor
    name = host_name(host)
    if ip_literal(name) is not None:
        return name
    if _extractor is None:
        import tldextract  # only a domain-keyed crawl pays for its import

        _extractor = tldextract.TLDExtract(suffix_list_urls=(), cache_dir=None, include_psl_private_domains=False)
    return _extractor(name).top_domain_under_public_suffix or name


def group_key(host: str, queue_by: str, address: str = "") -> str:
    """The queue group of `host` under politeness.queue_by; `address`: the IP its fetches connected to ("" unknown)."""
    if queue_by == "host":
        return host
    if queue_by == "domain":
        return registered_domain(host)
    if queue_by == "ip":
        return address or ip_literal(host) or host
    raise ValueError(f"queue_by must be one of {', '.join(QUEUE_BY)}, not {queue_by!r}")
