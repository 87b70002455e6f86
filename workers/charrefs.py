"""HTML character references in an attribute value, decoded as the HTML tokenizer decodes them.

    unescape_attribute('a?x=1&amp;y=2&copy=3') -> 'a?x=1&y=2&copy=3'

workers._linkscan returns attribute values as written; this is the tokenizer's "character reference state"
for them (WHATWG HTML 13.2.5.72-80): the longest named reference of the standard's table (html.entities.html5,
legacy names without ";" included), except that in an attribute a legacy name not ended by ";" and followed by
"=" or a letter or digit is left as written ("&copy=3" in a query stays); numeric references with or without
";", 0, surrogates and code points past U+10FFFF (however many digits) as U+FFFD, 0x80-0x9F as windows-1252 reads them. Unlike
html.unescape, control and non-characters are kept, as the standard keeps them.
"""

from __future__ import annotations

import re
from html.entities import html5

__all__ = ["unescape_attribute"]

_REFERENCE = re.compile(r"&(?:#([xX][0-9a-fA-F]+|[0-9]+);?|([A-Za-z][A-Za-z0-9]{0,31};?))")
_LONGEST_NAME = max(map(len, html5))


def _numeric(digits: str) -> str:
    hexadecimal = digits[0] in "xX"
    significant = (digits[1:] if hexadecimal else digits).lstrip("0") or "0"
    if len(significant) > 8:  # past U+10FFFF (and past what int() takes: 4,300 decimal digits raise)
        return "\ufffd"
    number = int(significant, 16 if hexadecimal else 10)
    if number == 0 or number > 0x10FFFF or 0xD800 <= number <= 0xDFFF:
        return "\ufffd"
    if 0x80 <= number <= 0x9F:
        try:
            return bytes((number,)).decode("cp1252")
        except UnicodeDecodeError:  # the five bytes windows-1252 leaves undefined stay themselves
            pass
    return chr(number)


def _replace(match: re.Match[str]) -> str:
    digits, name = match.groups()
    if digits is not None:
        return _numeric(digits)
    for end in range(min(len(name), _LONGEST_NAME), 1, -1):
        decoded = html5.get(name[:end])
        if decoded is None:
            continue
        if name[end - 1] == ";":
            return decoded + name[end:]
        after = name[end : end + 1] or match.string[match.end() : match.end() + 1]
        if after == "=" or (after.isascii() and after.isalnum()):
            return match[0]  # a legacy name run into more of the value: not a reference in an attribute
        return decoded + name[end:]
    return match[0]


def unescape_attribute(value: str) -> str:
    """`value` (an attribute value as written) with its character references decoded."""
    return _REFERENCE.sub(_replace, value) if "&" in value else value
