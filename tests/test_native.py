"""The C kernels (frontier._native) against the numpy path: the same digests, positions, bits, counters, flags
and counts on random data, so that a filter, snapshot or blacklist written by one path reads the same in the
other. The filters choose their path when they are built: FRONTIER_NO_NATIVE=1 (monkeypatched) gives numpy.
The canonicalisation fast path in C against frontier.url.canonical's Python: its answer or none."""

from __future__ import annotations

import itertools
import json
import random
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest
import xxhash
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from frontier.bench.stream import _distinct_urls, raw_variant
from frontier.errors import InvalidURL
from frontier.native import NO_NATIVE_ENV, native
from frontier.seen import blocked
from frontier.seen.blacklist import Blacklist
from frontier.seen.bloom import SharedBloom
from frontier.seen.counting import CountingBloom
from frontier.seen.fingerprint import fingerprints
from frontier.seen.positions import get_bits, keys, positions, set_bits
from frontier.url.canonical import (_NATIVE_NAMES, DEFAULT_RULES, CanonicalRules, _base_info, canonicalize,
                                    canonicalize_many)

_native = pytest.importorskip("frontier._native", reason="the C extension is not built")
pytestmark = pytest.mark.skipif(native() is None, reason=f"{NO_NATIVE_ENV} is set: the numpy path only")


@pytest.fixture
def numpy_path(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[Callable[[], object]], object]]:
    """Call a builder with the numpy path forced: what it builds keeps that path."""
    def build(make: Callable[[], object]) -> object:
        with monkeypatch.context() as m:
            m.setenv(NO_NATIVE_ENV, "1")
            assert native() is None
            return make()
    yield build


def random_fps(rng: random.Random, n: int, repeat_share: float = 0.0) -> list[bytes]:
    """n fingerprints, a share of them repeats of earlier ones (as in a crawl's batches)."""
    out: list[bytes] = []
    for _ in range(n):
        out.append(rng.choice(out) if out and rng.random() < repeat_share else rng.randbytes(16))
    return out


# -- hashing ----------------------------------------------------------------------------------------------

def test_fingerprints_are_xxhash_digests() -> None:
    rng = random.Random(1)
    alphabet = "abcXYZ09/:?&=%.-_~ é€😀\udcff\ud800"  # non-ASCII, astral, lone surrogates (surrogatepass)
    urls = ["", "http://example.com/"] + ["".join(rng.choices(alphabet, k=rng.randrange(300))) for _ in range(2000)]
    expected = [xxhash.xxh3_128_digest(u.encode("utf-8", "surrogatepass")) for u in urls]
    assert _native.fingerprints(urls) == expected
    assert fingerprints(urls) == expected  # the batch function takes the C path
    assert _native.fingerprints(tuple(urls[:5])) == expected[:5]
    with pytest.raises(TypeError):
        _native.fingerprints(["http://a/", b"http://b/"])


def test_join_takes_only_fingerprints() -> None:
    fps = random_fps(random.Random(2), 100)
    assert _native.join(fps) == b"".join(fps)
    assert _native.join(tuple(fps)) == b"".join(fps)
    assert _native.join([]) == b""
    for bad in (fps[:3] + [b"x" * 15], fps[:3] + ["http://a/"], fps[:3] + [bytearray(16)], iter(fps)):
        assert _native.join(bad) is None


# -- kernels against the numpy functions --------------------------------------------------------------------

@pytest.mark.parametrize("pbits,part_size,hashes", [(0, 64, 1), (3, 4096, 7), (6, 1 << 14, 13), (2, 999_424, 30)])
def test_bit_kernels_match_numpy(pbits: int, part_size: int, hashes: int) -> None:
    rng = np.random.default_rng(pbits + hashes)
    u8 = rng.integers(0, 256, size=(part_size << pbits) // 8, dtype=np.uint8) & rng.integers(0, 256, size=1,
                                                                                              dtype=np.uint8)
    fps = [bytes(x) for x in rng.integers(0, 256, size=(3000, 16), dtype=np.uint8)]
    joined = b"".join(fps)
    pos = positions(*keys(fps, pbits), part_size, hashes)
    spec = (u8, 1, part_size, hashes)
    found = np.frombuffer(_native.test(joined, pbits, [spec]), dtype=bool)
    assert (found == get_bits(u8, pos).all(axis=1)).all()

    select = rng.random(len(fps)) < 0.5
    expected = u8.copy()
    set_bits(expected, pos[select])
    _native.update(joined, pbits, spec, select)
    assert (u8 == expected).all()
    assert np.frombuffer(_native.test(joined, pbits, [spec]), dtype=bool)[select].all()


def test_counter_kernels_match_a_reference() -> None:
    rng = np.random.default_rng(7)
    pbits, part_size, hashes = 2, 256, 9
    u8 = np.zeros((part_size << pbits) // 2, dtype=np.uint8)
    spec = (u8, 4, part_size, hashes)
    counters = np.zeros(part_size << pbits, dtype=np.int64)  # the reference, one counter per int
    fps = [bytes(x) for x in rng.integers(0, 256, size=(400, 16), dtype=np.uint8)]
    joined = b"".join(fps)
    pos = positions(*keys(fps, pbits), part_size, hashes)
    for step, share in ((1, 1.0), (1, 1.0), (-1, 0.7), (1, 0.3), (-1, 1.0), (-1, 1.0)):  # saturation, clamping
        select = rng.random(len(fps)) < share
        for row in pos[select]:
            for j in row.tolist():  # one occurrence at a time: 15 stays, 0 stays
                if counters[j] != 15:
                    counters[j] = max(0, min(15, counters[j] + step))
        _native.update(joined, pbits, spec, select, 1, step)
        nibbles = np.stack([u8 & 0xF, u8 >> 4], axis=1).ravel()
        assert (nibbles == counters).all()
        present = np.frombuffer(_native.test(joined, pbits, [spec]), dtype=bool)
        assert (present == (counters[pos] > 0).all(axis=1)).all()


def test_firsts_is_the_first_occurrence_of_each_masked_item() -> None:
    rng = random.Random(3)
    fps = random_fps(rng, 5000, repeat_share=0.6)
    mask = np.array([rng.random() < 0.8 for _ in fps])
    seen: set[bytes] = set()
    expected = []
    for fp, m in zip(fps, mask.tolist()):
        expected.append(bool(m) and fp not in seen)
        if m:
            seen.add(fp)
    assert np.frombuffer(_native.firsts(b"".join(fps), mask), dtype=bool).tolist() == expected


def test_kernels_refuse_bad_arguments() -> None:
    u8 = np.zeros(64, dtype=np.uint8)
    fp = bytes(16)
    with pytest.raises(ValueError):
        _native.test(b"x" * 17, 0, [(u8, 1, 512, 3)])  # not whole fingerprints
    with pytest.raises(ValueError):
        _native.test(fp, 1, [(u8, 1, 512, 3)])  # 2 partitions of 512 bits do not fit in 64 bytes
    with pytest.raises(ValueError):
        _native.test(fp, 0, [(u8, 2, 64, 3)])  # cells of 1 or 4 bits
    with pytest.raises(ValueError):
        _native.update(fp, 0, (u8, 1, 512, 3), np.ones(1, dtype=bool), 1, -1)  # a bit cannot go down
    with pytest.raises(ValueError):
        _native.update(fp, 0, (u8, 1, 512, 3), np.ones(2, dtype=bool))  # one select byte per fingerprint
    with pytest.raises(BufferError):
        _native.update(fp, 0, (bytes(64), 1, 512, 3), np.ones(1, dtype=bool))  # a read-only buffer


@pytest.mark.parametrize(("blocks", "hashes"), [(1, 1), (7, 7), (3000, 12), (2999, 15), (50, 64)])
def test_block_kernels_match_numpy(blocks: int, hashes: int) -> None:
    """block_add / block_add_urls / block_test against frontier.seen.blocked's positions and a one-at-a-time reference."""
    rng = random.Random(blocks * 131 + hashes)
    urls = [f"http://h{rng.randrange(300)}.example/{rng.randrange(4000)}" for _ in range(4000)]
    fps = fingerprints(urls)
    pos = blocked.positions(fps, blocks, hashes)
    assert pos.tolist()[:300] == [list(blocked.positions_one(fp, blocks, hashes)) for fp in fps[:300]]
    assert (pos // 512 == pos[:, :1] // 512).all() and pos.max() < blocks * 512  # one block per item
    half = len(fps) // 2
    compiled, by_urls, reference = (np.zeros(blocks * 64, dtype=np.uint8) for _ in range(3))
    new = np.frombuffer(_native.block_add(b"".join(fps[:half]), (compiled, blocks, hashes)), dtype=bool)
    assert np.frombuffer(_native.block_add_urls(urls[:half], (by_urls, blocks, hashes)), dtype=bool).tolist() \
        == new.tolist()
    expected = []
    for row in pos[:half]:  # one at a time: new if one of its bits was unset
        expected.append(not get_bits(reference, row).all())
        set_bits(reference, row)
    assert new.tolist() == expected
    assert compiled.tobytes() == by_urls.tobytes() == reference.tobytes()
    found = np.frombuffer(_native.block_test(b"".join(fps), (compiled, blocks, hashes)), dtype=bool)
    assert found.tolist() == get_bits(reference, pos).all(axis=1).tolist() and found[:half].all()


def test_block_positions_of_a_large_filter() -> None:
    """The block is the high half of a * B: numpy's two 32-bit products agree with Python's exact one up to B < 2^32."""
    rng = random.Random(5)
    fps = [bytes(16), b"\xff" * 16] + random_fps(rng, 2000)
    for blocks in (2**32 - 1, 441_896_397, 3):
        pos = blocked.positions(fps, blocks, 13)
        assert pos.tolist() == [list(blocked.positions_one(fp, blocks, 13)) for fp in fps]
        assert (pos[:, 0] // 512).tolist() == [int.from_bytes(fp[:8], "big") * blocks >> 64 for fp in fps]


def test_block_kernels_refuse_bad_arguments() -> None:
    u8 = np.zeros(128, dtype=np.uint8)
    fp = bytes(16)
    for spec in [(u8, 0, 3), (u8, 3, 3), (u8, 2, 0), (u8, 2, 65), (u8, 2**32, 3)]:  # 3 blocks do not fit in 128 bytes
        with pytest.raises(ValueError):
            _native.block_test(fp, spec)
    with pytest.raises(ValueError):
        _native.block_add(b"x" * 17, (u8, 2, 3))
    with pytest.raises(BufferError):
        _native.block_add(fp, (bytes(128), 2, 3))  # a read-only buffer
    with pytest.raises(TypeError, match="URL string"):
        _native.block_add_urls(["http://a.example/", b"http://b.example/"], (u8, 2, 3))
    assert not u8.any()  # refused before any bit was set


# -- whole filters, both paths, the same input ------------------------------------------------------------------

def _stream(seed: int, batches: int, size: int) -> list[list[bytes]]:
    rng = random.Random(seed)
    pool = random_fps(rng, batches * size // 2)
    return [[rng.choice(pool) if rng.random() < 0.5 else rng.randbytes(16) for _ in range(size)]
            for _ in range(batches)]


def _segments(bloom: SharedBloom) -> list[bytes]:
    bloom._refresh()
    return [bytes(bloom._segment.buf)] + [g.u8.tobytes() for g in bloom._gens[1:]]


def test_shared_bloom_paths_agree_through_growth(numpy_path) -> None:
    # capacity 3,000 in 4 partitions, 24,000 distinct-ish items: several generations, partitions spilling
    with SharedBloom.create(3000, 1e-3, partitions=4) as compiled, \
            numpy_path(lambda: SharedBloom.create(3000, 1e-3, partitions=4)) as reference:
        assert compiled._native is not None and reference._native is None
        for batch in _stream(11, 40, 1000):
            assert compiled.add_many(batch) == reference.add_many(batch)
        assert compiled.generations == reference.generations >= 3
        assert len(compiled) == len(reference)
        # two-phase adds (URLSeen's path): a failed block leaves both as they were, a good one sets
        batch = list(dict.fromkeys(_stream(12, 1, 500)[0]))
        joined = b"".join(dict.fromkeys(_stream(15, 1, 500)[0] + batch[:100]))  # the same on one joined buffer
        for begin in (lambda bloom: bloom.adding(batch), lambda bloom: bloom.adding_joined(joined)):
            for bloom in (compiled, reference):
                with pytest.raises(RuntimeError), begin(bloom):
                    raise RuntimeError("the caller's record failed")
            assert _segments(compiled) == _segments(reference)
            flags = []
            for bloom in (compiled, reference):
                with begin(bloom) as is_new:
                    flags.append(is_new.tolist())
            assert flags[0] == flags[1] and any(flags[0])
            assert _segments(compiled) == _segments(reference)
        probe = random_fps(random.Random(13), 5000)
        assert compiled.contains_many(probe) == reference.contains_many(probe)


def test_shared_bloom_snapshot_reads_in_the_other_path(tmp_path, numpy_path) -> None:
    items = random_fps(random.Random(14), 20_000)
    with SharedBloom.create(5000, 1e-4, partitions=8) as compiled:
        compiled.add_many(items)
        compiled.save(tmp_path / "snap")
    with numpy_path(lambda: SharedBloom.load(tmp_path / "snap")) as reference:
        assert all(reference.contains_many(items))
        assert reference.add_many(items[:100]) == [False] * 100


def test_counting_bloom_paths_agree(numpy_path) -> None:
    with CountingBloom.create(20_000, 1e-3, partitions=8) as compiled, \
            numpy_path(lambda: CountingBloom.create(20_000, 1e-3, partitions=8)) as reference:
        assert compiled._native is not None and reference._native is None
        stream = _stream(21, 20, 1000)
        for batch in stream:
            assert compiled.add_many(batch) == reference.add_many(batch)
        for batch in stream[::3]:
            assert compiled.discard_many(batch[::2]) == reference.discard_many(batch[::2])
        extra = list(dict.fromkeys(_stream(22, 1, 300)[0]))
        compiled.count_many(extra)
        reference.count_many(extra)
        with pytest.raises(RuntimeError), compiled.adding(extra[:50]):
            raise RuntimeError("nothing changes")
        joined = b"".join(dict.fromkeys(_stream(24, 1, 300)[0] + extra[:50]))
        with pytest.raises(RuntimeError), compiled.adding_joined(joined):
            raise RuntimeError("nothing changes")
        flags = []
        for bloom in (compiled, reference):
            with bloom.adding_joined(joined) as new:
                flags.append(new.tolist())
        assert flags[0] == flags[1] and any(flags[0]) and not all(flags[0])
        assert bytes(compiled._segment.buf) == bytes(reference._segment.buf)
        assert len(compiled) == len(reference)
        probe = random_fps(random.Random(23), 3000) + extra
        assert compiled.contains_many(probe) == reference.contains_many(probe)


@pytest.mark.parametrize("error_rate", [1e-4, 0.2])
def test_blacklist_paths_write_the_same_bits(tmp_path, numpy_path, error_rate: float) -> None:
    """The C path adds in one pass, as if one URL at a time: a URL whose bits earlier URLs of its own batch all
    set is not new there, but new (and counted) in the numpy path, which tests a whole batch before setting.
    The bits are the same; the flags differ only there (p = 0.2 makes such URLs common)."""
    rng = random.Random(31)
    urls = [f"http://host{rng.randrange(500)}.example/p/{rng.randrange(40_000)}" for _ in range(60_000)]
    paths = [tmp_path / "compiled", tmp_path / "numpy"]
    only_numpy = 0
    with Blacklist.build(paths[0], 80_000, error_rate) as compiled, \
            numpy_path(lambda: Blacklist.build(paths[1], 80_000, error_rate)) as reference:
        assert compiled._native is not None and reference._native is None
        for start in range(0, len(urls), 7000):
            batch = urls[start:start + 7000]
            ours, theirs = compiled.add_many(batch, canonical=True), reference.add_many(batch, canonical=True)
            assert all(t for o, t in zip(ours, theirs) if o)  # new here: new there
            only_numpy += sum(t and not o for o, t in zip(ours, theirs))
        assert len(reference) - len(compiled) == only_numpy
        assert (only_numpy > 0) == (error_rate > 0.1)
    files = [p.read_bytes() for p in paths]
    assert files[0][64:] == files[1][64:] and files[0][:56] == files[1][:56]  # all but the count at 56
    probe = urls[:2000] + [f"http://other.example/{i}" for i in range(5000)]
    with Blacklist.open(paths[0]) as compiled, numpy_path(lambda: Blacklist.open(paths[1])) as reference:
        assert compiled.contains_many(probe, canonical=True) == reference.contains_many(probe, canonical=True)
        assert all(compiled.contains_many(urls, canonical=True))


# -- canonicalisation: the C fast path against frontier.url.canonical's Python --------------------------------------

_RULES = [CanonicalRules(sort_query=s, strip_session_ids=i, strip_tracking=t, keep_fragment=f)
          for s, i, t, f in itertools.product((False, True), repeat=4)]
_BASES = [None, "http://example.org/foo/bar", "http://a/b/c/d;p?q", "https://h.example:8080/a/b/?x=1", "HTTP://A",
          "http://a/b;JSESSIONID=1/%7e/./c/?", "https://xn--bcher-kva.example:8443/dir/", "mailto:x@y", "not a url"]
_INSERTS = list("%./;&=?#'\\ \t|[]@:~+é€") + [
    "%2e", "%2E", "%41", "%7e", "%2f", "%30", "%a0", "%5f", "%C3%bc", "%zz", "%4", "..", "/../", "/./", "//",
    ";jsessionid=1", ";SID=x", ";jsessionid", "utm_x=1", "UTM_x=2", "&sid=3", "&fbclid=1", "&", "&&", "=", ":0080", ":65536", ":00000", ":443",
    ":80", ":8080", "xn--", "\x00", "\x7f", "a=1&b=2", "b=2&a=1&a=0"]
_TRICKY = [
    "http://a/%%41%4%", "http://a/?&", "http://a/?=&=", "http://a/?b=1&a=2&a=1&b&=x&", "http://a/x?%61=1&%41=2&A=3",
    "http://a/.;jsessionid=1/x", "http://a/x;jsessionid=1;sid=2;SessionId=3/y;jsessionid=/;jsessionid",
    "http://a/a/b/../../../c/./d/..", "http://a//..//./x//", "http://a/%2e%2E/x/%2E", "http://a/.%2e/x",
    "http://a?x#y", "http://a#y", "http://a:?x", "https://a:0443/", "http://a:0/", "http://a:00000/x",
    "http://1.2.3.4:80/", "http://256.1.1.1/", "http://01.2.3.4/", "http://1.2.3/", "http://a.1/", "http://a_b-C.d/",
    "http://" + "x" * 63 + ".com/", "http://" + "x" * 64 + ".com/", "http://" + ".".join(["a" * 50] * 5) + "/",
    "http://a/x#f%7e%41", "http://a/x#f<", "http://a/x#", "http://a/x?'", "http://a/x'", "http:x", "http:/x",
    "http://a/?" + "&".join(f"k{i % 7}=v{i}" for i in range(60)), "http://a/" + "x/../" * 200 + "y",
    "http://a/?" + "&".join(["sid=1", "utm_a=2", "UTM_=3", "gclid=4", "x=5", "Sid=6", "utm=7"] * 5),
    "", "?", "#", "?q", "#f", "x", "./x", "../x", "../../../../x", "/x/./y/../", "?a=1&b", "a:b", "ab:c", "abc:d",
    "abcd:e", "abcde:f", "/abc:d", "1a:b", "//x/y", "x/y:z", ".", "..", "./", "x;jsessionid=1/y", "?utm_a=1&x=2",
]


def _mutated(rng: random.Random, url: str) -> str:
    """url with a few case flips, deletions and insertions from _INSERTS."""
    chars = list(url)
    for _ in range(rng.randrange(1, 5)):
        roll = rng.random()
        if roll < 0.3 and chars:
            at = rng.randrange(len(chars))
            chars[at] = chars[at].swapcase()
        elif roll < 0.45 and chars:
            del chars[rng.randrange(len(chars))]
        else:
            chars.insert(rng.randrange(len(chars) + 1), rng.choice(_INSERTS))
    return "".join(chars)


@pytest.fixture(scope="module")
def url_inputs() -> list[str]:
    """wpt's inputs, generated URLs (canonical and raw), tricky ones, and random mutations of all of them."""
    wpt = json.loads((Path(__file__).parent / "data" / "urltestdata.json").read_text("utf-8"))
    urls = [c["input"] for c in wpt if isinstance(c, dict)]
    generated = _distinct_urls(np.random.default_rng(3), 1500)
    urls += generated + raw_variant(generated, 4) + _TRICKY
    rng = random.Random(5)
    return urls + [_mutated(rng, rng.choice(urls)) for _ in range(10_000)]


def _reference(url: str, base: str | None, rules: CanonicalRules) -> str | None:
    """frontier.url.canonical's answer in Python: call it with FRONTIER_NO_NATIVE set (canonicalize takes the
    C path too when the extension is on)."""
    assert native() is None, "the reference must be the Python path"
    try:
        return canonicalize(url, base, rules)
    except InvalidURL:
        return None


def _kernel(urls: list, base: str | None, rules: CanonicalRules) -> tuple[list, list]:
    flags = (rules.sort_query, rules.strip_session_ids, rules.strip_tracking, rules.keep_fragment)
    return _native.canonicalize(urls, flags, _NATIVE_NAMES, _base_info(base)[1] if base is not None else None)


@pytest.mark.parametrize("base", _BASES)
def test_canonicalize_kernel_answers_as_python_or_not_at_all(url_inputs: list[str], base: str | None,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """A string from C is always Python's answer; None leaves the URL to Python."""
    monkeypatch.setenv(NO_NATIVE_ENV, "1")  # for the reference; the kernel is called directly
    answered = 0
    for rules in _RULES:
        out, missed = _kernel(url_inputs, base, rules)
        assert missed == [i for i, r in enumerate(out) if r is None]
        for url, got in zip(url_inputs, out):
            if got is not None:
                assert got == _reference(url, base, rules), (url, base, rules)
                answered += 1
    assert answered > 0.4 * len(url_inputs) * len(_RULES)  # not vacuous: C answers most of them


@pytest.mark.parametrize("base", _BASES[:4] + _BASES[-1:])
def test_canonicalize_many_same_on_both_paths(url_inputs: list[str], base: str | None,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    urls = url_inputs[::3] + [None, b"http://x/", 7]
    for rules in _RULES[::3]:
        compiled = canonicalize_many(urls, base, rules)
        one_by_one = [_answer(u, base, rules) for u in urls[::7]]  # canonicalize takes the C path per URL
        with monkeypatch.context() as m:
            m.setenv(NO_NATIVE_ENV, "1")
            assert canonicalize_many(urls, base, rules) == compiled
            assert canonicalize_many(tuple(urls), base, rules) == compiled
            assert [_answer(u, base, rules) for u in urls[::7]] == one_by_one


def _answer(url: object, base: str | None, rules: CanonicalRules) -> str:
    """canonicalize's result, or the InvalidURL's reason."""
    try:
        return canonicalize(url, base, rules)  # type: ignore[arg-type]
    except InvalidURL as e:
        return f"InvalidURL: {e.reason}"


def test_canonicalize_kernel_takes_the_crawl_stream() -> None:
    """Every URL of the benchmark's stream (raw, and as hrefs of a page) stays in C."""
    generated = _distinct_urls(np.random.default_rng(6), 3000)
    raw = raw_variant(generated, 7)
    for rules in (DEFAULT_RULES, CanonicalRules(strip_session_ids=True, strip_tracking=True)):
        assert _kernel(raw, None, rules)[1] == []
        assert _kernel(generated, None, rules)[0] == [canonicalize(u, rules=rules) for u in generated]
    page = generated[0]
    paths = [rest[rest.find("/"):] for rest in (u.partition("://")[2] for u in raw[:500]) if "/" in rest]
    hrefs = paths + [p.lstrip("/") for p in paths] + [p[p.find("?"):] for p in paths if "?" in p] + ["", "#top"]
    hrefs += ["//" + u.partition("://")[2] for u in raw[:100]]  # scheme-relative
    out, missed = _kernel(hrefs, page, DEFAULT_RULES)
    assert len(hrefs) > 900 and missed == []
    assert out == [canonicalize(h, page) for h in hrefs]


def test_canonicalize_kernel_leaves_the_odd_ones_and_checks_its_arguments() -> None:
    urls = ["http://a/", None, b"http://b/", "http://ü.example/", "http://a/ x", "ftp://a/", "http://xn--a.b/"]
    out, missed = _kernel(urls, None, DEFAULT_RULES)
    assert out == ["http://a/"] + [None] * 6 and missed == [1, 2, 3, 4, 5, 6]
    assert _kernel((), None, DEFAULT_RULES) == ([], [])
    assert _kernel(tuple(urls[:1]), None, DEFAULT_RULES)[0] == ["http://a/"]
    flags = (True, False, False, False)
    with pytest.raises(TypeError):
        _native.canonicalize(5, flags, _NATIVE_NAMES, None)
    with pytest.raises(TypeError):
        _native.canonicalize(urls, flags, _NATIVE_NAMES, ("http://a", "/", 1))
    with pytest.raises(TypeError):
        _native.canonicalize(urls, flags, _NATIVE_NAMES, ("http://ü", "/", None))
    for origin, path in (("http://a", "x"), ("http://a", ""), ("ftp://a", "/"), ("http:/", "/")):
        with pytest.raises(ValueError, match="an origin"):
            _native.canonicalize(urls, flags, _NATIVE_NAMES, (origin, path, None))
    with pytest.raises(ValueError, match="lowercase"):
        _native.canonicalize(urls, flags, (("SID",), (), "utm_"), None)


def test_an_extension_built_from_other_source_is_not_used(monkeypatch: pytest.MonkeyPatch) -> None:
    """A stale build (an editable install whose source moved on without a rebuild) lacks functions this
    code calls: the numpy path is taken, with a warning that says how to rebuild."""
    from frontier import native as native_module

    assert native_module.built_extension() is _native
    monkeypatch.setattr(_native, "VERSION", native_module.NATIVE_VERSION - 1)
    with pytest.warns(RuntimeWarning, match="rebuild it with pip install"):
        assert native_module.built_extension() is None


# -- the fingerprint log's sorted runs ---------------------------------------------------------------------


def _run_inputs(rng: random.Random) -> list[list[bytes]]:
    """Batches of fingerprints that stress the sort and merge: uniform, one skewed top (every fingerprint in one
    of sort_unique's buckets: its qsort path), equal first halves, duplicates, keys spanning the whole range, a
    single one, none, and a big one (a first pass of 256 buckets, one of them holding the skewed top)."""
    uniform = random_fps(rng, 3000, repeat_share=0.1)
    skewed = [b"\x12\x34" + rng.randbytes(14) for _ in range(500)]
    twins = [fp[:8] + rng.randbytes(8) for fp in uniform[:200] for _ in range(3)]
    extremes = [b"\x00" * 16, b"\xff" * 16, b"\x80" + bytes(15), b"\xff" * 16, bytes(15) + b"\x01"]  # the whole range
    big = random_fps(rng, 20000, repeat_share=0.1) + twins + skewed  # past FIRST_PASS_MIN: two flag passes
    rng.shuffle(big)
    return [uniform, skewed, uniform[:300] + twins + skewed[:50], extremes, [uniform[0]], [], big]


def test_sort_and_merge_kernels_give_the_numpy_paths_bytes(numpy_path) -> None:
    from frontier.seen import fpruns

    rng = random.Random(21)
    for fps in _run_inputs(rng):
        joined = b"".join(fps)
        expected = numpy_path(lambda: fpruns.sorted_unique([joined], presorted=False))
        got = fpruns.sorted_unique([joined], presorted=False)
        assert got[0] == expected[0] == b"".join(sorted(set(fps)))
        assert got[1].tolist() == expected[1].tolist()
        for k in (1, 2, 4, 16):  # sorted parts, overlapping (duplicates across parts), some empty
            parts = [b"".join(sorted(set(fps[i::k + 1]))) for i in range(k)] + [b""]
            merged = fpruns.sorted_unique(parts, presorted=True)
            assert merged[0] == numpy_path(lambda: fpruns.sorted_unique(parts, presorted=True))[0]
            assert merged[0] == b"".join(sorted(set().union(*(fpruns.split(p) for p in parts))))


def test_merge_kernel_refuses_what_it_cannot_take() -> None:
    with pytest.raises(ValueError, match="multiple of 16"):
        _native.merge_unique([b"x" * 17])
    with pytest.raises(ValueError, match="at most 256 inputs"):
        _native.merge_unique([b""] * 257)
    with pytest.raises(TypeError):
        _native.merge_unique(5)
    with pytest.raises(ValueError, match="multiple of 16"):
        _native.sort_unique(b"x" * 15)


def test_chunk_search_kernel_answers_as_the_scan() -> None:
    """chunk_has (binary search of a sorted chunk) against _in_chunk (bytes.find at fingerprint offsets): every
    entry, the first and the last, strangers, entries sharing a first half, a fingerprint straddling two entries."""
    from frontier.seen import fpruns

    rng = random.Random(23)
    for size in (0, 1, 2, 7, 255):
        fps = sorted({rng.randbytes(16) for _ in range(size)})
        fps = sorted(set(fps + [fps[0][:8] + rng.randbytes(8) for _ in range(3)] if fps else fps))  # equal halves
        chunk = b"".join(fps)
        probes = fps + [rng.randbytes(16) for _ in range(50)] + [fp[:8] + rng.randbytes(8) for fp in fps[:5]]
        probes += [chunk[i:i + 16] for i in range(8, len(chunk) - 16, 16)][:5]  # across two entries: not held
        for fp in probes:
            assert _native.chunk_has(chunk, fp) == fpruns._in_chunk(chunk, fp) == (fp in fps), (size, fp)


def test_chunk_search_kernel_refuses_what_it_cannot_take() -> None:
    with pytest.raises(ValueError, match="whole fingerprints"):
        _native.chunk_has(b"x" * 17, b"y" * 16)
    with pytest.raises(ValueError, match="whole fingerprints"):
        _native.chunk_has(b"x" * 16, b"y" * 15)
    with pytest.raises(TypeError):
        _native.chunk_has("a str", b"y" * 16)


def _runs_reference(probes: list[bytes], found: list[bool], runs: list[tuple[set[bytes], int, int, object]]) -> list[bool]:
    """find_cached in plain Python: a probe is found if known already or a run whose key range and filter
    allow it holds it."""
    out = []
    for fp, known in zip(probes, found):
        hi = int.from_bytes(fp[:8], "big")
        out.append(known or any(first <= hi <= last and (f is None or f.may_hold_one(fp)) and fp in members
                                for members, first, last, f in runs))
    return out


_halves = st.one_of(st.integers(0, 2**64 - 1), st.sampled_from([0, 1, 2**63, 2**64 - 1]))  # ties, extremes


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pool=st.lists(st.tuples(_halves, _halves), min_size=1, max_size=120, unique=True), data=st.data())
def test_runs_find_matches_a_reference(pool: list[tuple[int, int]], data, monkeypatch: pytest.MonkeyPatch) -> None:
    """frontier._native.runs_find (and the numpy path of fpruns.find_cached) against a pure-Python lookup: random
    runs (equal first halves included), key ranges, run filters, probes in and out of the runs, some known."""
    from frontier.seen.fpruns import CachedRun, Pairs, RunFilter, filter_segment, find_cached

    fps = [h.to_bytes(8, "big") + low.to_bytes(8, "big") for h, low in pool]
    runs, reference = [], []
    for _ in range(data.draw(st.integers(0, 4))):
        members = sorted(set(data.draw(st.lists(st.sampled_from(fps), max_size=len(fps)))))
        first, last = sorted(data.draw(st.tuples(_halves, _halves)))
        if data.draw(st.booleans()):
            first, last = 0, 2**64 - 1
        run_filter = None
        if members and data.draw(st.booleans()):
            run_filter = RunFilter(data.draw(st.integers(1, 8)))
            run_filter.merge(*filter_segment(run_filter.blocks, b"".join(members)))
        runs.append(CachedRun(Pairs(b"".join(members)), first, last, run_filter))
        reference.append((set(members), first, last, run_filter))
    rng = random.Random(len(pool))
    strangers = [rng.randbytes(16) for _ in range(5)]
    probes = data.draw(st.lists(st.sampled_from(fps + strangers), max_size=200))
    known = data.draw(st.lists(st.booleans(), min_size=len(probes), max_size=len(probes)))
    want = _runs_reference(probes, known, reference)
    blob = b"".join(probes)
    found = np.array(known, dtype=bool)
    find_cached(blob, found, runs)
    assert found.tolist() == want
    with monkeypatch.context() as m:
        m.setenv(NO_NATIVE_ENV, "1")
        found = np.array(known, dtype=bool)
        find_cached(blob, found, runs)
        assert found.tolist() == want


def test_runs_find_refuses_bad_arguments() -> None:
    fp = bytes(16)
    u64 = np.zeros(2, dtype=np.uint64)
    found = np.zeros(1, dtype=bool)
    with pytest.raises(ValueError, match="one length"):
        _native.runs_find(fp, found, [(u64, u64[:1], 0, 2**64 - 1, None, 0)])
    with pytest.raises(ValueError, match="a filter of 2 blocks"):
        _native.runs_find(fp, found, [(u64, u64, 0, 2**64 - 1, bytes(64), 2)])
    with pytest.raises(ValueError, match="found"):
        _native.runs_find(fp, np.zeros(2, dtype=bool), [])
    with pytest.raises(BufferError):
        _native.runs_find(fp, bytes(1), [])  # read-only
    with pytest.raises(TypeError, match="a run is a tuple"):
        _native.runs_find(fp, found, [[u64, u64, 0, 1, None, 0]])
    assert _native.runs_find(fp + fp, np.array([True, False]), []) == 1
