"""A seeded, crawl-like stream of link occurrences for the seen-test benchmark.

`crawl_stream(n_links, seed)` returns `n_links` URL strings. About `repeat_share` of them repeat a URL
emitted earlier, chosen half by recency (a log-uniform distance back among the distinct URLs so far:
links on neighbouring pages, site navigation: bursts) and half by popularity (each URL has a Zipf
weight 1/rank, its rank a random permutation: a few pages are linked from everywhere). The URLs are
canonical already (`frontier.url.canonical.canonicalize(u) == u`; `check_canonical` verifies a sample):
https/http, several thousand hosts with realistic names and TLDs (page counts per host Zipf-like),
paths of 1-5 segments of words, slugs, ids and dates, .html/.php/no extension, a quarter with a
sorted query string. Mean length is about 80 characters.

Every occurrence is its own string object, as a link extracted from a page would be, so no row of
the benchmark profits from a str hash cached by an earlier occurrence. `fresh_copy` makes another
independent copy for a second timed run.

`generate` returns the ground truth besides: the URL id of every occurrence, which occurrences are
first ones, and never-emitted probe URLs. `raw_variant` writes the same URLs non-canonically (mixed
case, default ports, dot-segments, unsorted queries, fragments, needless escapes) for timing the
canonicalisation itself.

All random draws are numpy, vectorised; the only per-URL Python work is string assembly (10M
occurrences: about 3M distinct URLs, some seconds).
"""

from __future__ import annotations

import gc
import math
from dataclasses import dataclass

import numpy as np

__all__ = ["SHAPES", "CrawlStream", "Shape", "check_canonical", "crawl_stream", "fresh_copy", "generate", "materialize", "mean_length",
           "raw_variant"]

DEFAULT_REPEAT_SHARE = 0.7
BURST_SHARE = 0.5  # of repeats: drawn by recency (bursts); the rest by Zipf popularity
ZIPF_EXPONENT = 1.0
MIN_HOSTS, MAX_HOSTS, URLS_PER_HOST = 200, 6000, 50

WORDS = (
    "about account action active address admin advice agent album alpha analysis animal annual answer "
    "apple archive area article artist audio author auto award baby back bank base basket beach beauty "
    "best bike bird black blog blue board body book boston brand bread bridge build business buy cable "
    "calendar camera campus car card care career cart case catalog category center chart chat city "
    "class classic clean client climate cloud club coffee college color comment community company "
    "compare computer contact content cook country course cover create credit culture cup daily data "
    "date deal debate design detail device diary digital dinner direct disease doctor dog download "
    "dream drive early earth east economy editor education energy engine event every experience expert "
    "family fashion feature festival file film finance find fire fish fitness flight flower food "
    "football forest forum free fresh friend fruit fund game garden general gift global gold golf "
    "green group guide hair health heart help history hobby holiday home hotel house idea image index "
    "info insight island item jazz job journal kids kitchen lab lake language law learn legal library "
    "life light list live local london love magazine mail map market media medical member menu metal "
    "mobile model money motor mountain movie music nature network news night north note office online "
    "open order organic outdoor page paper park partner party people photo planet play plus policy "
    "politics post power press price print product profile project property public quality quick "
    "radio rain reader recipe record red research review river road rock room royal rule safety sale "
    "school science search season secure service share shop show silver simple site smart social "
    "software solar sound south space sport star state stock store story street student studio style "
    "summer sun support system table tag team tech test text theatre time tool top tour town trade "
    "travel tree trip tv united update urban user valley video view village vision voice water weather "
    "web week west white wiki wild wine winter wood work world write yellow young zone"
).split()

TLDS = (("com", 46), ("org", 8), ("net", 6), ("de", 6), ("co.uk", 4), ("fr", 3), ("io", 3), ("ru", 3),
        ("jp", 2), ("com.br", 2), ("edu", 2), ("gov", 1), ("info", 2), ("nl", 2), ("it", 2), ("es", 2),
        ("pl", 1), ("ca", 1), ("com.au", 1), ("ch", 1), ("se", 1), ("in", 1), ("us", 1), ("co", 1))
SUBDOMAINS = (("www.", 50), ("", 24), ("blog.", 4), ("shop.", 3), ("news.", 3), ("en.", 3), ("m.", 3),
              ("forum.", 2), ("docs.", 2), ("support.", 2), ("store.", 2), ("wiki.", 2))
QUERY_KEYS = ("category", "id", "lang", "page", "q", "ref", "size", "sort", "tag", "utm_source", "v")
WORD_VALUED = frozenset((0, 2, 4, 5, 7, 8, 9))  # QUERY_KEYS indexes whose values are words, not numbers
QUERY_WORDS = ("asc", "desc", "en", "de", "fr", "home", "nav", "footer", "twitter", "rss", "newsletter")
EXTENSIONS = ("", ".html", ".php", "/")
EXTENSION_P = (0.5, 0.3, 0.1, 0.1)
SEGMENT_P = (0.06, 0.2, 0.32, 0.24, 0.18)  # 1..5 path segments
# segment kinds: 0 word, 1 slug of SLUG_WORDS words, 2 numeric id, 3 date y/m/d, 4 word+digits
KIND_P = (0.34, 0.32, 0.18, 0.06, 0.1)
SLUG_WORDS = (3, 7)
QUERY_SHARE = 0.3


@dataclass(frozen=True, kw_only=True)
class Shape:
    """How long the stream's URLs are: path segments, their kinds, extensions and query strings.

    The default (`SHAPES["medium"]`, about 83 bytes) is the benchmark's main stream; "short" (about
    50 bytes: short paths, no query) and "long" (about 150: deep paths, every URL with a query) show how a
    seen-test's per-URL overhead compares with a peer whose cost falls with the URL's length."""

    segment_p: tuple[float, ...] = SEGMENT_P  # P(1, 2, ... path segments)
    kind_p: tuple[float, ...] = KIND_P
    extension_p: tuple[float, ...] = EXTENSION_P
    query_share: float = QUERY_SHARE
    params: tuple[int, int] = (1, 3)  # query parameters per query, inclusive


SHAPES = {
    "short": Shape(segment_p=(0.0, 0.4, 0.6), kind_p=(0.5, 0.0, 0.3, 0.0, 0.2), extension_p=(0.2, 0.6, 0.1, 0.1),
                   query_share=0.0),
    "medium": Shape(),
    "long": Shape(segment_p=(0.0, 0.0, 0.0, 0.3, 0.7), kind_p=(0.2, 0.5, 0.2, 0.05, 0.05), query_share=1.0,
                  params=(2, 3)),
}


@dataclass(frozen=True)
class CrawlStream:
    """A stream with its ground truth."""

    urls: list[str]  # n_links occurrences, each its own string object
    ids: np.ndarray  # int64 id of each occurrence's URL; ids count up from 0 in order of first emission
    first: np.ndarray  # bool: occurrence i is the first of its URL
    distinct_urls: list[str]  # distinct_urls[id]
    probes: list[str]  # canonical URLs of the same shapes that the stream never emits

    @property
    def distinct(self) -> int:
        return len(self.distinct_urls)


def crawl_stream(n_links: int, seed: int, repeat_share: float = DEFAULT_REPEAT_SHARE) -> list[str]:
    """`n_links` canonical URL occurrences, about `repeat_share` of them repeats (see the module doc)."""
    return generate(n_links, seed, repeat_share).urls


def generate(n_links: int, seed: int, repeat_share: float = DEFAULT_REPEAT_SHARE, *,
             probes: int = 0, shape: Shape = SHAPES["medium"]) -> CrawlStream:
    """The stream plus its ground truth and `probes` never-emitted URLs."""
    if n_links < 1:
        raise ValueError(f"n_links must be >= 1, got {n_links}")
    if not 0.0 <= repeat_share < 1.0:
        raise ValueError(f"repeat_share must be in [0, 1), got {repeat_share}")
    rng = np.random.default_rng(seed)
    ids, first = _occurrences(rng, n_links, repeat_share)
    distinct = int(first.sum())
    was_enabled = gc.isenabled()
    gc.disable()  # millions of new strings and no cycles: the cyclic GC would only rescan them
    try:
        urls = _distinct_urls(rng, distinct + probes, shape)
        return CrawlStream(urls=materialize(urls, ids), ids=ids, first=first, distinct_urls=urls[:distinct],
                           probes=urls[distinct:])
    finally:
        if was_enabled:
            gc.enable()


def _occurrences(rng: np.random.Generator, n: int, repeat_share: float) -> tuple[np.ndarray, np.ndarray]:
    """URL id per occurrence: new ids in order, repeats by recency (bursts) or Zipf popularity."""
    first = rng.random(n) >= repeat_share
    first[0] = True
    new_before = np.cumsum(first) - first  # distinct URLs emitted before occurrence i
    distinct = int(first.sum())
    ids = np.empty(n, dtype=np.int64)
    ids[first] = np.arange(distinct, dtype=np.int64)
    rep = np.flatnonzero(~first)
    burst = rng.random(len(rep)) < BURST_SHARE
    # recency: a distance back in [0, d) that is log-uniform, so most repeats are of recent URLs
    r = rep[burst]
    d = new_before[r].astype(np.float64)  # >= 1
    back = np.minimum(np.floor(np.exp(rng.random(len(r)) * np.log(d))) - 1.0, d - 1.0)
    ids[r] = (d - 1.0 - back).astype(np.int64)
    # popularity: P(id j) proportional to its Zipf weight, among the d ids emitted so far
    r = rep[~burst]
    d = new_before[r]
    cum = np.cumsum(1.0 / (rng.permutation(distinct).astype(np.float64) + 1.0) ** ZIPF_EXPONENT)
    target = rng.random(len(r)) * cum[d - 1]
    order = np.argsort(target)  # sorted queries keep searchsorted in cache
    picked = np.empty(len(r), dtype=np.int64)
    picked[order] = np.searchsorted(cum, target[order], side="right")
    ids[r] = np.minimum(picked, d - 1)
    return ids, first


def materialize(distinct_urls: list[str], ids: np.ndarray) -> list[str]:
    """One new string object per occurrence (join + split runs in C)."""
    return "\n".join([distinct_urls[i] for i in ids.tolist()]).split("\n")


def fresh_copy(urls: list[str]) -> list[str]:
    """Independent string objects with equal values (no str hash cached from a previous run)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        return "\n".join(urls).split("\n")
    finally:
        if was_enabled:
            gc.enable()


def _weighted(rng: np.random.Generator, pairs: tuple[tuple[str, int], ...], size: int) -> list[str]:
    names = [p[0] for p in pairs]
    w = np.array([p[1] for p in pairs], dtype=np.float64)
    return [names[i] for i in rng.choice(len(names), size=size, p=w / w.sum()).tolist()]


def _hosts(rng: np.random.Generator, count: int) -> list[str]:
    """`count` distinct realistic host names (lowercase, canonical)."""
    words = WORDS
    w = rng.integers(0, len(words), size=(count, 2)).tolist()
    style = rng.integers(0, 5, size=count).tolist()
    digits = rng.integers(1, 1000, size=count).tolist()
    subs = _weighted(rng, SUBDOMAINS, count)
    tlds = _weighted(rng, TLDS, count)
    seen: set[str] = set()
    hosts = []
    for i in range(count):
        a, b = words[w[i][0]], words[w[i][1]]
        name = (a, a + b, f"{a}-{b}", f"{a}{digits[i]}", f"{a}{b}")[style[i]]
        host = f"{subs[i]}{name}.{tlds[i]}"
        if host in seen:
            host = f"{subs[i]}{name}{i}.{tlds[i]}"  # i is unique, so this name is new
        seen.add(host)
        hosts.append(host)
    return hosts


def _distinct_urls(rng: np.random.Generator, count: int, shape: Shape = SHAPES["medium"]) -> list[str]:
    """`count` distinct canonical URLs, assembled column-wise (map/join in C, no per-URL branching)."""
    n_hosts = int(min(MAX_HOSTS, max(MIN_HOSTS, count // URLS_PER_HOST)))
    hosts = _hosts(rng, n_hosts)
    https = (rng.random(n_hosts) < 0.8).tolist()
    port = (rng.random(n_hosts) < 0.01).tolist()  # a few hosts on a non-default port
    origins = np.array([("https://" if s else "http://") + h + (":8080" if p else "") + "/"
                        for h, s, p in zip(hosts, https, port)], dtype=object)
    host_weight = 1.0 / (np.arange(n_hosts) + 5.0) ** 1.1  # pages per host: Zipf-like
    origin = origins[rng.choice(n_hosts, size=count, p=host_weight / host_weight.sum())]

    nseg = rng.choice(len(shape.segment_p), size=count, p=shape.segment_p) + 1
    segs = _segments(rng, int(nseg.sum()), shape.kind_p)
    first_seg = np.cumsum(nseg) - nseg
    path = np.empty(count, dtype=object)
    for n in range(1, len(shape.segment_p) + 1):
        rows = np.flatnonzero(nseg == n)
        cols = [segs[first_seg[rows] + k].tolist() for k in range(n)]
        path[rows] = list(map("/".join, zip(*cols)))
    ext = np.array(EXTENSIONS, dtype=object)[rng.choice(len(EXTENSIONS), size=count, p=shape.extension_p)]
    query = _queries(rng, count, shape)
    urls = list(map("".join, zip(origin.tolist(), path.tolist(), ext.tolist(), query)))
    return _unique(urls, origin.tolist())


def _segments(rng: np.random.Generator, total: int, kind_p: tuple[float, ...] = KIND_P) -> np.ndarray:
    """`total` path segments: words, slugs, ids, dates, word+digits."""
    words = np.array(WORDS, dtype=object)
    kind = rng.choice(len(kind_p), size=total, p=kind_p)
    segs = np.empty(total, dtype=object)
    sel = np.flatnonzero(kind == 0)
    segs[sel] = words[rng.integers(0, len(WORDS), size=len(sel))]
    sel = np.flatnonzero(kind == 1)
    length = rng.integers(SLUG_WORDS[0], SLUG_WORDS[1] + 1, size=len(sel))
    for n in range(SLUG_WORDS[0], SLUG_WORDS[1] + 1):
        rows = sel[length == n]
        cols = [words[rng.integers(0, len(WORDS), size=len(rows))].tolist() for _ in range(n)]
        segs[rows] = list(map("-".join, zip(*cols)))
    sel = np.flatnonzero(kind == 2)
    number = rng.integers(100, 10**8, size=len(sel))
    number = np.where(rng.random(len(sel)) < 0.5, number % 100_000 + 100, number)
    segs[sel] = list(map(str, number.tolist()))
    sel = np.flatnonzero(kind == 3)
    date = (rng.integers(1998, 2026, size=len(sel)) * 10000 + rng.integers(1, 13, size=len(sel)) * 100
            + rng.integers(1, 29, size=len(sel)))
    segs[sel] = [f"{d // 10000}/{d // 100 % 100:02d}/{d % 100:02d}" for d in date.tolist()]
    sel = np.flatnonzero(kind == 4)
    segs[sel] = list(map("".join, zip(words[rng.integers(0, len(WORDS), size=len(sel))].tolist(),
                                       map(str, rng.integers(1, 1000, size=len(sel)).tolist()))))
    return segs


def _queries(rng: np.random.Generator, count: int, shape: Shape = SHAPES["medium"]) -> list[str]:
    """"" or "?k=v&..." with `shape.params` params sorted by key (canonical), for a `shape.query_share` of the
    URLs."""
    out = np.full(count, "", dtype=object)
    rows = np.flatnonzero(rng.random(count) < shape.query_share)
    n_params = rng.integers(shape.params[0], shape.params[1] + 1, size=len(rows))
    keys = np.sort(np.argsort(rng.random((len(rows), len(QUERY_KEYS))), axis=1)[:, :3], axis=1)
    key_text = np.array([k + "=" for k in QUERY_KEYS], dtype=object)
    word_valued = np.array([i in WORD_VALUED for i in range(len(QUERY_KEYS))])
    qwords = np.array(QUERY_WORDS, dtype=object)
    params = []
    for slot in range(3):
        k = keys[:, slot]
        numbers = np.array(list(map(str, rng.integers(0, 5000, size=len(rows)).tolist())), dtype=object)
        value = np.where(word_valued[k], qwords[rng.integers(0, len(QUERY_WORDS), size=len(rows))], numbers)
        params.append(key_text[k] + value)
    for n in (1, 2, 3):
        sel = n_params == n
        # keys sorted over all three slots; the first n of a sorted triple are sorted too
        out[rows[sel]] = ["?" + "&".join(t) for t in zip(*(p[sel].tolist() for p in params[:n]))]
    return out.tolist()


def _unique(urls: list[str], origins: list[str]) -> list[str]:
    """Make colliding URLs (short word paths) unique with an id segment; keeps them canonical."""
    seen: set[str] = set()
    add = seen.add
    dups = [i for i, url in enumerate(urls) if url in seen or add(url)]
    for i in dups:
        url = urls[i]
        path, q, query = url[len(origins[i]):].partition("?")
        for attempt in range(4):
            url = f"{origins[i]}{path.rstrip('/')}{'/' if path else ''}{i}{'x' * attempt}{q}{query}"
            if url not in seen:
                break
        else:
            raise RuntimeError(f"could not make URL {i} unique")
        add(url)
        urls[i] = url
    return urls


def raw_variant(urls: list[str], seed: int) -> list[str]:
    """The same resources written non-canonically: what a page's hrefs look like before canonicalize."""
    rng = np.random.default_rng(seed)
    n = len(urls)
    r = rng.random((n, 7)).tolist()
    out = []
    for i, url in enumerate(urls):
        p = r[i]
        scheme, _, rest = url.partition("://")
        slash = rest.find("/")
        auth, path = (rest[:slash], rest[slash:]) if slash >= 0 else (rest, "/")
        path, q, query = path.partition("?")
        if p[0] < 0.4:
            scheme = scheme.upper() if p[0] < 0.2 else scheme.capitalize()
        if p[1] < 0.5:
            auth = "".join(c.upper() if (j + i) % 3 == 0 else c for j, c in enumerate(auth))
        if p[2] < 0.3 and ":" not in auth:
            auth += ":443" if scheme.lower() == "https" else ":80"
        if p[3] < 0.3:
            cut = path.find("/", 1)
            path = (path[:cut] + "/./x/.." + path[cut:]) if cut > 0 else "/./" + path[1:]
        if p[4] < 0.2 and "-" in path:
            path = path.replace("-", "%2d", 1)
        if q and "&" in query and p[5] < 0.8:
            query = "&".join(reversed(query.split("&")))
        if path == "/" and not q and p[5] < 0.5:
            path = ""
        tail = ("#" + ("top", "comments", "section-2", "")[int(p[6] * 8) % 4]) if p[6] < 0.3 else ""
        out.append(f"{scheme}://{auth}{path}{q}{query}{tail}")
    return out


def check_canonical(urls: list[str], sample: int, seed: int) -> int:
    """How many of a random sample change under `canonicalize` (0 for a valid stream)."""
    from frontier.url.canonical import canonicalize

    rng = np.random.default_rng(seed)
    pick = rng.choice(len(urls), size=min(sample, len(urls)), replace=False).tolist()
    return sum(canonicalize(urls[i]) != urls[i] for i in pick)


def mean_length(urls: list[str], sample: int = 200_000) -> float:
    """Mean length in UTF-8 bytes (the URLs are ASCII) over an evenly spaced sample."""
    step = max(1, len(urls) // sample)
    picked = urls[::step]
    return sum(map(len, picked)) / len(picked) if picked else math.nan
