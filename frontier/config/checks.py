"""The value checks of the crawl config: each returns the normalised value or raises ConfigError naming the dotted
key. The sections (frontier.config.schema) call them from `__post_init__`, so a config built in Python is checked
as one read from YAML is.
"""

from __future__ import annotations

import difflib
import ipaddress
import math
import os
import re
from collections.abc import Mapping
from dataclasses import field
from pathlib import Path
from typing import Any

from frontier.errors import ConfigError

_CRAWL_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}")


# -- value checks: each returns the normalised value or raises ConfigError naming `key` ---------------


def _describe(value: Any) -> str:
    shown = repr(value)
    if len(shown) > 60:
        shown = shown[:57] + "..."
    return f"{shown} ({type(value).__name__})"


def _numeric_string_hint(value: Any) -> str:
    if isinstance(value, str):
        try:
            float(value)
        except ValueError:
            return ""
        return " (YAML 1.1 reads 1e7 and 1.0e7 as strings: write 10000000 or 1.0e+7, unquoted)"
    return ""


def _as_int(value: Any, key: str, *, minimum: int | None = None, maximum: int | None = None,
            optional: bool = False) -> int | None:
    if value is None and optional:
        return None
    if isinstance(value, float) and not isinstance(value, bool) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        what = "an integer or null" if optional else "an integer"
        raise ConfigError(f"expected {what}, got {_describe(value)}{_numeric_string_hint(value)}", key=key)
    if minimum is not None and value < minimum:
        raise ConfigError(f"must be >= {minimum}, got {value}", key=key)
    if maximum is not None and value > maximum:
        raise ConfigError(f"must be <= {maximum}, got {value}", key=key)
    return value


def _as_float(value: Any, key: str, *, minimum: float | None = None, above: float | None = None,
              below: float | None = None, optional: bool = False) -> float | None:
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        what = "a number or null" if optional else "a number"
        raise ConfigError(f"expected {what}, got {_describe(value)}{_numeric_string_hint(value)}", key=key)
    value = float(value)
    if not math.isfinite(value):
        raise ConfigError(f"must be a finite number, got {value}", key=key)
    if minimum is not None and value < minimum:
        raise ConfigError(f"must be >= {minimum:g}, got {value:g}", key=key)
    if above is not None and value <= above:
        raise ConfigError(f"must be > {above:g}, got {value:g}", key=key)
    if below is not None and value >= below:
        raise ConfigError(f"must be < {below:g}, got {value:g}", key=key)
    return value


def _as_bool(value: Any, key: str) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(f"expected true or false, got {_describe(value)}", key=key)
    return value


def _as_str_tuple(value: Any, key: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)):
        raise ConfigError(f"expected a list of strings, got {_describe(value)}", key=key)
    for i, item in enumerate(value):
        if not isinstance(item, str):
            raise ConfigError(f"expected a string, got {_describe(item)}", key=f"{key}[{i}]")
    return tuple(value)


def _as_path(value: Any, key: str, *, optional: bool = False) -> Path | None:
    if value is None and optional:
        return None
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    if not isinstance(value, str) or not value.strip():
        what = "a path or null" if optional else "a path"
        raise ConfigError(f"expected {what}, got {_describe(value)}", key=key)
    return Path(value).expanduser()


def _resolve(path: Path | None, base: Path) -> Path | None:
    if path is None:
        return None
    return Path(os.path.normpath(base / path))  # base / absolute == absolute


def _check_keys(raw: Mapping[Any, Any], valid: tuple[str, ...] | list[str], prefix: str) -> None:
    for key in raw:
        if not isinstance(key, str):
            raise ConfigError(f"keys must be strings, got {_describe(key)}", key=f"{prefix}{key}")
        if key not in valid:
            close = difflib.get_close_matches(key, valid, n=1, cutoff=0.6)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ConfigError(f"unknown key{hint}; valid keys here: {', '.join(valid)}", key=f"{prefix}{key}")


# -- per-field helpers for __post_init__ --------------------------------------------------------------


def _doc(default: Any, meaning: str) -> Any:
    return field(default=default, metadata={"doc": meaning})


def _doc_map(meaning: str) -> Any:
    """A mapping key, kept as a tuple of (key, value) pairs (hashable, like the rest); default {}."""
    return field(default=(), metadata={"doc": meaning, "mapping": True})


def _key(obj: Any, name: str) -> str:
    return f"{obj._SECTION}.{name}"


def _fix(obj: Any, name: str, check: Any, **kwargs: Any) -> None:
    object.__setattr__(obj, name, check(getattr(obj, name), _key(obj, name), **kwargs))


# -- request options (workers.headers, proxy, auth) ---------------------------------------------------------

# Headers the fetcher sets itself: per request kind (Accept), for its capped decoding (Accept-Encoding), per
# host (Authorization, Cookie: workers.auth, workers.cookies), from politeness.user_agent, or for the
# connection and its framing. An extra header goes to every host, so credentials there would leak.
RESERVED_HEADERS = frozenset({
    "accept", "accept-encoding", "authorization", "connection", "content-length", "cookie", "host",
    "keep-alive", "proxy-authorization", "proxy-connection", "te", "trailer", "transfer-encoding", "upgrade",
    "user-agent"})
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+\Z")  # an RFC 9110 token


def _plain_text(value: Any, key: str, what: str) -> str:
    """A non-empty string without control characters (it is sent in an HTTP header)."""
    if not isinstance(value, str) or not value:
        raise ConfigError(f"expected {what}, got {_describe(value)}", key=key)
    if any(ord(c) < 32 or ord(c) == 127 for c in value):
        raise ConfigError("must not contain control characters (it is sent in an HTTP header)", key=key)
    return value


def _pairs(value: Any, key: str, what: str) -> list[tuple[Any, Any]]:
    """A mapping key's items: from a mapping, or the tuple of pairs it is kept as."""
    if value is None:
        return []
    if isinstance(value, Mapping):
        return list(value.items())
    if isinstance(value, tuple) and all(isinstance(p, tuple) and len(p) == 2 for p in value):
        return list(value)
    raise ConfigError(f"expected a mapping of {what}, got {_describe(value)}", key=key)


def _as_headers(value: Any, key: str) -> tuple[tuple[str, str], ...]:
    headers: dict[str, str] = {}
    for name, text in _pairs(value, key, "header names to values"):
        if not isinstance(name, str) or not _HEADER_NAME.match(name):
            raise ConfigError(f"not an HTTP header name: {name!r}", key=f"{key}.{name}")
        if name.lower() in RESERVED_HEADERS:
            raise ConfigError("the fetcher sets this header itself (politeness.user_agent, workers.auth, "
                              "workers.cookies or per request)", key=f"{key}.{name}")
        if any(n.lower() == name.lower() for n in headers):
            raise ConfigError("given twice (header names are case-insensitive)", key=f"{key}.{name}")
        if text == "":
            headers[name] = ""
        else:
            headers[name] = _plain_text(text, f"{key}.{name}", "a string")
    return tuple(headers.items())


def _check_proxy(value: Any, key: str) -> None:
    """http(s)://[user:password@]host:port; the message never repeats the URL (it may hold a password)."""
    from urllib.parse import urlsplit

    if not isinstance(value, str):
        raise ConfigError(f"expected a proxy URL or null, got a {type(value).__name__}", key=key)
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 - raises ValueError on a bad port
    except ValueError:
        raise ConfigError("not a URL (expected http://[user:password@]host:port)", key=key) from None
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.path not in ("", "/") \
            or parts.query or parts.fragment or any(ord(c) <= 32 or ord(c) == 127 for c in value):
        raise ConfigError("expected http://[user:password@]host:port (or https://)", key=key)


# -- values checked for other parts (storage.redis.crawl, output.metrics) ----------------------------------


def check_crawl_name(crawl: str) -> str:
    if not isinstance(crawl, str) or not _CRAWL_NAME.fullmatch(crawl):
        raise ConfigError(f"must be 1-100 letters, digits, '_', '.' or '-', starting with a letter or digit; "
                          f"got {crawl!r}", key="storage.redis.crawl")
    return crawl


def split_address(text: Any, key: str = "output.metrics", *, ephemeral: bool = False) -> tuple[str, int]:
    """(host, port) of "host:port" ("[::1]:9410" for IPv6); ConfigError naming `key` otherwise. Port 0 (the system
    picks a free port) only with `ephemeral`."""
    host, sep, port = text.rpartition(":") if isinstance(text, str) else ("", "", "")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    lowest = 0 if ephemeral else 1
    if not sep or not host or not port.isdigit() or not lowest <= int(port) <= 65535:
        raise ConfigError(f'expected "host:port" (e.g. "127.0.0.1:9410") or null, got {text!r}', key=key)
    return host, int(port)


def is_loopback(host: str) -> bool:
    """True for "localhost" and loopback IP addresses; a name or a wildcard address may be reached from outside."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def bind_needs(host: str, *, tls: bool, token: str | None, allow_insecure: bool) -> list[str]:
    """What serving on `host` lacks: [] for a loopback host, an explicit `allow_insecure`, or TLS with a token;
    else the missing ones of "tls" and "token". The one rule of every server the project runs (`frontier serve`,
    the console): an API that changes a crawl is reachable from elsewhere only with both, or when the operator
    says so."""
    if is_loopback(host) or allow_insecure or (tls and token):
        return []
    return [what for what, ok in (("tls", tls), ("token", token)) if not ok]
