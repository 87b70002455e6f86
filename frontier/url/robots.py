"""robots.txt rules of one host, parsed once with protego (Scrapy's parser), RFC 9309 semantics."""

from __future__ import annotations


class RobotsRules:
    """What one host's robots.txt allows our user agent. Build with `parse`, `allow_all` or `disallow_all`."""

    __slots__ = ("_parser", "_user_agent", "_allow", "crawl_delay")

    def __init__(self, parser: object | None, user_agent: str, allow: bool, crawl_delay: float | None) -> None:
        self._parser = parser
        self._user_agent = user_agent
        self._allow = allow
        self.crawl_delay = crawl_delay

    @classmethod
    def parse(cls, text: str, user_agent: str) -> "RobotsRules":
        """Rules from a robots.txt body; an empty body allows everything."""
        if not text.strip():
            return cls.allow_all()
        from protego import Protego

        try:
            parser = Protego.parse(text)
            delay = parser.crawl_delay(user_agent)
        except Exception:  # protego is lenient; a parser bug must not stop the crawl
            return cls.allow_all()
        return cls(parser, user_agent, True, float(delay) if delay is not None else None)

    @classmethod
    def allow_all(cls) -> "RobotsRules":
        """No robots.txt (4xx): everything is allowed (RFC 9309 2.3.1.3)."""
        return cls(None, "", True, None)

    @classmethod
    def disallow_all(cls) -> "RobotsRules":
        """robots.txt unreachable (5xx, network) after retries: assume complete disallow (RFC 9309 2.3.1.4)."""
        return cls(None, "", False, None)

    def allows(self, url: str) -> bool:
        if self._parser is None:
            return self._allow
        try:
            return bool(self._parser.can_fetch(url, self._user_agent))
        except Exception:
            return True
