"""Connecting to Redis or Valkey from a URL, safely, and loading frontier's Functions library.

    client = connect("rediss://user:secret@10.0.0.5:6379/0", cluster="auto")   # redis.Redis or RedisCluster
    load_library(client)              # FUNCTION LOAD REPLACE on every master lacking this library version
    redact("redis://user:secret@host:6379/0") == "redis://user:***@host:6379/0"

URLs: redis:// (plain TCP), rediss:// (TLS; redis-py's query options apply, e.g. ?ssl_ca_certs=/path/ca.pem),
unix:///path/to.sock. `redis://user:password@host` logs in as an ACL user, `redis://:password@host` with
requirepass. A server that is not on this machine (not a loopback address, "localhost" or a unix socket)
is refused without a password unless `allow_unauthenticated=True`: a crawl's state open to anyone on the
network is a mistake to make on purpose; with a password over plain redis:// (to it, or to a Cluster node
discovered through a local one) unless `allow_plaintext=True`: use rediss://. `cluster`: True (a Redis
Cluster: the URL names any node), False (one server), "auto" (ask the server: INFO cluster). Redis >= 7.0 or
Valkey >= 7.2 is needed (Functions).

The password never appears in an error message, a repr or stats: they show `redact(url)`. redis-py's
exceptions do not leave this module's callers: a bad URL or setting is a ConfigError; a server that
cannot be reached, refuses the login or the commands is a StorageError (`redis_errors` translates). So is
any other exception raised inside redis-py's code (`raised_by_client`): a release's bug, such as the
AttributeError of redis-py 8.1 and 8.2 on an ASK redirect to a master that owns no slot yet, is a fault of
the step, not a traceback.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Iterator, Sequence
from typing import Literal
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit, urlunsplit

import redis
from redis.cluster import RedisCluster

from frontier.config.checks import is_loopback
from frontier.errors import ConfigError, StorageError
from frontier.state.redis_lua import FRONTIER, Library

Client = redis.Redis | RedisCluster
URLs = str | Sequence[str]  # one server, or the startup nodes of a Cluster (any of which may be down)
ClusterMode = bool | Literal["auto"]

DEFAULT_TIMEOUT = 10.0  # seconds to connect, and to wait for one reply
SCHEMES = ("redis", "rediss", "unix")
MIN_REDIS_VERSION = (7, 0)  # FUNCTION LOAD / FCALL; Valkey 7.2+ reports redis_version 7.2.4
# a queue segment stays a compact listpack only while every entry (about 17 bytes + the URL's path) fits:
# docs/guide/redis.md "Memory on the server"
LISTPACK_VALUE = 256
_SECRET = "***"
_CLIENT_CODE = os.path.dirname(os.path.abspath(redis.__file__)) + os.sep  # redis-py's own source files
_NEEDS_PASSWORD = "the server requires a password: put it in the URL (redis://user:password@host:port/0)"


def _password(parts) -> str | None:
    if parts.password:
        return unquote(parts.password)
    for key, value in parse_qsl(parts.query):
        if key == "password" and value:
            return value
    return None


def redact(url: URLs) -> str:
    """The URL with its password (in the authority or a ?password= option) replaced by ***; a list's, joined."""
    if not isinstance(url, str):
        return ", ".join(redact(u) for u in url)
    try:
        parts = urlsplit(url)
        netloc = parts.netloc
        if parts.password is not None:
            netloc = f"{parts.username or ''}:{_SECRET}@{netloc.rpartition('@')[2]}"
        query = urlencode([(k, _SECRET if "password" in k.lower() else v) for k, v in parse_qsl(parts.query)],
                          safe="*/")
        return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))
    except ValueError:
        return "<unparsable Redis URL>"


def is_local(url: str) -> bool:
    """True for a unix socket, "localhost" or a loopback address: a server on this machine."""
    parts = urlsplit(url)
    if parts.scheme == "unix":
        return True
    return is_loopback(parts.hostname or "")


def check_url(url: str, *, allow_unauthenticated: bool = False, allow_plaintext: bool = False) -> str:
    """ConfigError for a URL frontier will not use: bad syntax or scheme, a remote server without a password,
    or a password over plain redis:// to a remote server (unless allow_plaintext)."""
    if not isinstance(url, str) or not url:
        raise ConfigError("must be a redis://, rediss:// or unix:// URL", key="storage.redis.url")
    shown = redact(url)
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018  (raises ValueError for a bad port)
    except ValueError as e:
        raise ConfigError(f"not a valid URL: {shown} ({e})", key="storage.redis.url") from None
    if parts.scheme not in SCHEMES:
        raise ConfigError(f"must be a redis://, rediss:// or unix:// URL, got {shown}", key="storage.redis.url")
    if parts.scheme != "unix" and not parts.hostname:
        raise ConfigError(f"names no host: {shown}", key="storage.redis.url")
    if _password(parts) is None and not is_local(url) and not allow_unauthenticated:
        raise ConfigError(f"{shown} is not on this machine and the URL has no password: anyone who can reach it "
                          "could read and change the crawl. Put the password in the URL "
                          "(redis://user:password@host:port/0), or set storage.redis.allow_unauthenticated: true "
                          "if the network is trusted", key="storage.redis.allow_unauthenticated")
    warning = plaintext_warning(url)
    if warning is not None and not allow_plaintext:
        raise ConfigError(warning.removeprefix("frontier: ") + ", or set storage.redis.allow_plaintext: true if the "
                          "network is trusted", key="storage.redis.allow_plaintext")
    return url


def check_nodes(url: str, hosts: Sequence[str], *, allow_plaintext: bool = False) -> None:
    """ConfigError when a password over plain redis:// would reach a Cluster node not on this machine that was
    discovered through `url` (a loopback seed whose Cluster announces remote addresses)."""
    parts = urlsplit(url)
    if parts.scheme != "redis" or _password(parts) is None or allow_plaintext:
        return
    remote = sorted({h for h in hosts if not is_local(f"redis://[{h}]:1" if ":" in h else f"redis://{h}:1")})
    if remote:
        raise ConfigError(f"{redact(url)}: the Cluster's nodes {', '.join(remote)} are not on this machine and the "
                          "password would cross the network unencrypted (redis://): use rediss:// (TLS), or set "
                          "storage.redis.allow_plaintext: true if the network is trusted",
                          key="storage.redis.allow_plaintext")


def plaintext_warning(url: str) -> str | None:
    """What to tell the operator when the URL sends a password unencrypted over a network (redis:// to a
    server not on this machine; rediss:// is TLS); None otherwise."""
    parts = urlsplit(url)
    if parts.scheme != "redis" or _password(parts) is None or is_local(url):
        return None
    return (f"frontier: {redact(url)}: the password crosses the network unencrypted (redis://): use rediss:// "
            "(TLS) for a server not on this machine")


def scrub(text: str, url: str) -> str:
    """The text with the URL's password (as written, and decoded) replaced by ***."""
    parts = urlsplit(url)
    for secret in (parts.password, _password(parts)):
        if secret:
            text = text.replace(secret, _SECRET)
    return text


def raised_by_client(e: BaseException) -> bool:
    """True for an exception that is not one of redis-py's error types but passed through redis-py's code: a bug
    of the client (an AttributeError on an internal None), which its next call may not meet again."""
    if isinstance(e, (redis.RedisError, redis.exceptions.RedisClusterException)):
        return False
    tb = e.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename.startswith(_CLIENT_CODE):
            return True
        tb = tb.tb_next
    return False


@contextlib.contextmanager
def redis_errors(url: str, doing: str) -> Iterator[None]:
    """Translate redis-py errors raised inside into StorageError naming the (redacted) server and the step."""
    try:
        yield
    except redis.AuthenticationError:
        if _password(urlsplit(url)) is None:
            raise StorageError(f"{redact(url)}: {doing}: {_NEEDS_PASSWORD}") from None
        raise StorageError(f"{redact(url)}: {doing}: login refused (wrong user name or password)") from None
    except redis.exceptions.NoPermissionError as e:
        raise StorageError(f"{redact(url)}: {doing}: the user lacks a permission: {scrub(str(e), url)}") from None
    except (redis.ConnectionError, redis.TimeoutError) as e:
        raise StorageError(f"{redact(url)}: {doing}: cannot reach the server: {scrub(str(e), url)}") from None
    except (redis.RedisError, redis.exceptions.RedisClusterException) as e:
        message = scrub(str(e), url)
        if "NOAUTH" in message:
            message = _NEEDS_PASSWORD
        raise StorageError(f"{redact(url)}: {doing}: {message}") from None
    except Exception as e:
        if not raised_by_client(e):
            raise
        raise StorageError(f"{redact(url)}: {doing}: the Redis client failed (redis-py {redis.__version__}): "
                           f"{type(e).__name__}: {scrub(str(e), url)}") from None


def _fcall_keys_locally(client: RedisCluster) -> None:
    """redis-py asks a node (COMMAND GETKEYS, one more round trip that carries the whole payload) for the keys
    of every FCALL it routes; an FCALL's keys are its own numkeys arguments, so read them here instead."""
    parser = client.commands_parser
    get_keys = parser.get_keys

    def keys(redis_conn: object, *args: object) -> list[object] | None:
        if str(args[0]).upper() in ("FCALL", "FCALL_RO"):
            return list(args[3:3 + int(args[2])])  # type: ignore[call-overload]
        return get_keys(redis_conn, *args)

    parser.get_keys = keys  # type: ignore[method-assign]


def first_reachable(urls: URLs, *, allow_unauthenticated: bool = False, allow_plaintext: bool = False,
                    timeout: float = DEFAULT_TIMEOUT) -> str:
    """The first of `urls` whose server answers PING (one URL: itself, unasked; its errors come from
    `connect`); a StorageError naming every URL tried when none does. A Cluster client discovers the other
    nodes from the one that answered, so a dead startup node does not stop a crawl from starting."""
    if isinstance(urls, str):
        return urls
    if not urls:
        raise ConfigError("names no server", key="storage.redis.url")
    tried = []
    for url in urls:
        check_url(url, allow_unauthenticated=allow_unauthenticated, allow_plaintext=allow_plaintext)
        probe = redis.Redis.from_url(url, socket_timeout=timeout, socket_connect_timeout=timeout)
        try:
            probe.ping()
            return url
        except (redis.ConnectionError, redis.TimeoutError) as e:
            tried.append(f"{redact(url)} ({scrub(str(e), url)})")
        finally:
            probe.close()
    raise StorageError(f"cannot reach any of the servers tried: {'; '.join(tried)}")


def connect(url: str, *, cluster: ClusterMode = "auto", allow_unauthenticated: bool = False,
            allow_plaintext: bool = False, timeout: float = DEFAULT_TIMEOUT) -> Client:
    """A connected client (one PING answered) of the server or Cluster at `url`; see the module doc."""
    check_url(url, allow_unauthenticated=allow_unauthenticated, allow_plaintext=allow_plaintext)
    if cluster not in (True, False, "auto"):
        raise ConfigError(f"must be auto, true or false, got {cluster!r}", key="storage.redis.cluster")
    if not timeout > 0:
        raise ConfigError(f"must be > 0 seconds, got {timeout!r}", key="storage.redis.timeout")
    options = {"socket_timeout": timeout, "socket_connect_timeout": timeout}
    with redis_errors(url, "connecting"):
        if cluster == "auto":
            probe = redis.Redis.from_url(url, **options)
            try:
                cluster = bool(probe.info("cluster").get("cluster_enabled"))
            finally:
                probe.close()
        if cluster:
            client: Client = RedisCluster.from_url(url, **options)
            try:
                check_nodes(url, [node.host for node in client.get_nodes()], allow_plaintext=allow_plaintext)
            except ConfigError:
                client.close()
                raise
            _fcall_keys_locally(client)
            try:
                _await_masters(client, timeout)
            except BaseException:
                client.close()
                raise
        else:
            client = redis.Redis.from_url(url, **options)
        try:
            client.ping()
        except BaseException:
            client.close()
            raise
    return client


def _await_masters(client: RedisCluster, timeout: float) -> None:
    """Wait until every master of the Cluster's slot map answers PING, reading the map again meanwhile, for up
    to `timeout` seconds: the node that answered may not have learnt yet that its peers failed a dead master
    over, and names it still. A master still unreachable after that raises redis-py's ConnectionError."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            for node in primaries(client):
                node.ping()
            return
        except (redis.ConnectionError, redis.TimeoutError):
            if time.monotonic() >= deadline:
                raise
            time.sleep(0.2)
            client.nodes_manager.initialize()


def primaries(client: Client) -> list[redis.Redis]:
    """A plain client per master: the one server, or every master of a Cluster."""
    if isinstance(client, RedisCluster):
        return [node.redis_connection for node in client.get_primaries()]
    return [client]


def uses_jemalloc(client: Client) -> bool:
    """True if every master allocates with jemalloc (Redis's default build; the layout pads to its size classes)."""
    return all(str(node.info("memory").get("mem_allocator", "")).startswith("jemalloc") for node in primaries(client))


def check_servers(client: Client, url: str) -> None:
    """Refuse a master that may evict keys (maxmemory-policy allkeys-*: seen chunks, queues or counters would
    vanish, URLs be lost or fetched again without bound; frontier sets no TTL, so volatile-* never evicts its
    keys); warn, once per master, when one keeps nothing across a restart (no RDB save points, no AOF), and
    when one with replicas does not set min-replicas-to-write (partitioned, it would take writes a failover
    loses), and when zset-max-listpack-value is below LISTPACK_VALUE (long URLs' segments become skiplists)."""
    for node in primaries(client):
        where = node.get_connection_kwargs().get("port", "")
        policy = str(node.info("memory").get("maxmemory_policy", "noeviction"))
        if policy.startswith("allkeys-"):
            raise StorageError(f"{redact(url)}: the server (port {where}) has maxmemory-policy {policy}, which may "
                               "evict the crawl's keys: set maxmemory-policy noeviction")
        replicas = int(node.info("replication").get("connected_slaves", 0))
        if replicas and _config_int(node, "min-replicas-to-write") == 0:
            print(f"frontier: {redact(url)}: the server (port {where}) has {replicas} replica(s) but "
                  "min-replicas-to-write 0: cut off from them it still takes writes that a failover then loses "
                  "(set min-replicas-to-write 1, min-replicas-max-lag 10)", file=sys.stderr, flush=True)
        listpack = _config_int(node, "zset-max-listpack-value")
        if listpack is not None and listpack < LISTPACK_VALUE:
            print(f"frontier: {redact(url)}: the server (port {where}) has zset-max-listpack-value {listpack}: "
                  "queued URLs with longer paths take about 100 bytes more each "
                  f"(set zset-max-listpack-value {LISTPACK_VALUE})", file=sys.stderr, flush=True)
        if int(node.info("persistence").get("aof_enabled", 0)):
            continue
        try:
            save = node.config_get("save").get("save", "")
        except redis.ResponseError:  # CONFIG renamed or not allowed: say nothing rather than guess
            continue
        if not save:
            print(f"frontier: {redact(url)}: the server (port {where}) has persistence off (no RDB save, no AOF): "
                  "a restart loses the crawl, which then stops with an error", file=sys.stderr, flush=True)


def _config_int(node: redis.Redis, name: str) -> int | None:
    """CONFIG GET name as an int; None where CONFIG is renamed or not allowed (then nothing is said)."""
    try:
        value = node.config_get(name).get(name)
    except redis.ResponseError:
        return None
    return None if value is None else int(value)


def load_library(client: Client, url: str, library: Library = FRONTIER) -> int:
    """Load frontier's library (or another `library`) with FUNCTION LOAD REPLACE on every master that lacks this
    version of it; the number of masters loaded. Functions persist and replicate: replicas get the library from
    their master."""
    loaded = 0
    with redis_errors(url, "loading the Functions library"):
        for node in primaries(client):
            version = tuple(int(x) for x in str(node.info("server")["redis_version"]).split(".")[:2])
            if version < MIN_REDIS_VERSION:
                raise StorageError(f"{redact(url)}: Redis {'.'.join(map(str, version))} has no Functions; "
                                   "frontier needs Redis >= 7.0 or Valkey >= 7.2")
            try:
                current = node.fcall_ro(library.version_function, 0)
            except redis.ResponseError:  # no such function: not loaded yet
                current = None
            if current != library.version.encode():
                node.function_load(library.text, replace=True)
                loaded += 1
    return loaded
