"""The one exception tree of frontier; foreign errors are translated where they enter.

    FrontierError                 anything frontier raises on purpose
     +-- InvalidURL (ValueError)   a URL that cannot be canonicalised; .reason says why
     +-- ConfigError (ValueError)  a bad setting or parameter; .key names it when known
     +-- ControlError (ValueError) bad input to an operator's action (frontier.console.control): one line
     +-- StorageError              the data dir cannot be used: unwritable, corrupt, foreign, in use
          +-- VersionMismatch       written with another canonicalisation or format version
          +-- DiskFull              the disk (not the LMDB map) has no room; a rerun resumes

lmdb's errors never escape fplog.py and state/crawlstore.py; aiohttp errors become a fetch status in the
worker and never cross a queue.
"""

from __future__ import annotations


class FrontierError(Exception):
    """Base of every error frontier raises on purpose."""


class InvalidURL(FrontierError, ValueError):
    """A URL that cannot be canonicalised (bad scheme, host, port, or syntax).

    Args:
        url: the URL as given (the message shows its first 200 characters).
        reason: what is wrong with it, e.g. "bad port".
    """

    def __init__(self, url: str, reason: str) -> None:
        self.url = url
        self.reason = reason
        shown = url if len(url) <= 200 else url[:200] + "..."
        super().__init__(f"{reason}: {shown!r}")


class ConfigError(FrontierError, ValueError):
    """A bad setting; `key` is the dotted name of the offending key when there is one.

    Args:
        message: what is wrong, and what is expected.
        key: the dotted name of the offending key (e.g. "politeness.delay"); it prefixes the message.
    """

    def __init__(self, message: str, key: str | None = None) -> None:
        self.key = key
        super().__init__(f"{key}: {message}" if key else message)


class StorageError(FrontierError):
    """The data dir cannot be used as it is: unwritable, corrupt, foreign, or in use."""


class VersionMismatch(StorageError):
    """The data dir was written with another canonicalisation or storage format version."""


class DiskFull(StorageError):
    """The file system is out of space; nothing committed is lost and a rerun resumes."""
