"""Random HTML pages for the differential tests of a page's links: workers._linkscan (one tokenizer pass)
against lexbor (a full tree builder), in tests/test_linkscan.py and `python -m frontier.bench fuzz-links`.

    random_page(rng) -> str          tags, attributes, comments, raw text, tables, svg and math, NUL, any text
    random_table_page(rng) -> str    tables and distinct links only: where foster parenting reorders links

A page is a pure function of the `random.Random` (or Hypothesis's `st.randoms()`) handed in. The pieces are the
places where a one-pass scanner and a tree builder may part: the tokenizer's states (attribute quoting, comments
and their odd endings, bogus comments, DOCTYPE, "<?" processing instructions, CDATA, raw text end tags), the
tree builder's moves (foster parenting out of tables, foreign content in svg and math, elements that break
out of it) and NUL, written inside and around one another.
"""

from __future__ import annotations

import random
from collections.abc import Callable

__all__ = ["random_page", "random_table_page"]

_VALUE_PARTS = ["x", "/y", "?q=1", "#f", "&amp;", "&amp", "&copy=", "&#x26;", "&#38", "&lt", "&", ">", "'", '"', " ",
                "\n", "\r", "=", "<", "`", "nofollow", "\u00e9", "\x00", "&#0;", "&#1114112;"]
_ATTR_NAMES = ["href", "href", "href", "HREF", "rel", "REL", "name", "content", "x", "=href", "hr'ef", "name",
               "h\x00ref"]
_TAG_NAMES = ["a", "A", "area", "base", "meta", "table", "tr", "td", "th", "caption", "tbody", "col", "colgroup",
              "div", "p", "b", "noscript", "li", "abbr", "scripts", "a", "a", "a", "area", "a\x00"]
_META_NAMES = ["robots", "ROBOTS", " robots ", "x", "&#114;obots", "robots\x00"]
_OTHER = ["<!--", "-->", "--!>", "<!-->", "<!--->", "--", "-", "!", "<!DOCTYPE html>", "<?x>", "<!x>", "<", "</", ">",
          "</script>", "</SCRIPT >", "</style/>", "</title>", "</textarea>", "</table>", "text", " ", "\n", "&amp;",
          "\u20ac", "\U0001f600", "\x00", "<?", "<?xml version='1.0'?>", "<![CDATA[", "]]>", "</svg>", "</math>",
          "<?</svg>>", "<!</svg>>", "</3>", "</>"]
_RAW_NAMES = ["script", "SCRIPT", "style", "title", "textarea", "xmp", "iframe", "noembed"]
_RAW_ENDS = ["</{}>", "</{} >", "</{}/>", "</{}s>", "</{}", "<!--</{}>-->"]
_TABLE_TAGS = ["<tr>", "</tr>", "<td>", "</td>", "<th>", "</th>", "<caption>", "</caption>", "<col>", "<colgroup>",
               "</colgroup>", "<tbody>", "</tbody>", "<thead>", "<table>", "</table>", "<div>", "</div>", "<p>",
               "<form>", "<base href=/b/>", "<meta name=robots content=x>"]
_RARE = ["<template>", "<svg>", "<math>", "<select>", "<plaintext>", "<frameset>", "\x00"]
# inside svg and math: what a scanner may skip over (comments, "<?" and "<!" bogus comments hiding an end tag, NUL,
# text), and what ends foreign content or holds a link (CDATA, HTML elements, integration points)
_FOREIGN_QUIET = ["<!-- <a href=c> -->", "<!-- </svg> -->", "<?", "<?</svg>>", "<?x?>", "<?xml version='1.0'?>",
                  "<!x>", "<!</svg>>", "<!DOCTYPE svg>", "</>", "</3>", "\x00", ">", "<", "x", "&amp;", "--!>"]
_FOREIGN_LOUD = ["<a href=s>", "<foreignObject>", "<style>", "<div>", "<![CDATA[", "<![CDATA[</svg>]]>", "]]>",
                 "<title>", "<text>x</text>", "<desc>", "</desc>", "<font color=red>", "<b>", "<br>", "<p>"]
# after an svg or math: what reads differently in foreign content and in HTML, should the svg not have ended
_FOREIGN_AFTER = ["<textarea><p><a href=t>", "<title><meta name=robots content=nofollow></title>", "<![CDATA[><a href=d>",
                  "<style><a href=s></style>", "<a href=a>", "<table><a href=f>", "</textarea>", "]]>"]
_SVG = ["<path d='M1 1'/>", "<g>", "</g>", "<circle r=1>", "<tspan>", "</tspan>", "<rect/>", "<use href=#i />"]
_MATH = ["<mi>x</mi>", "<mo>", "<mtext>", "</mtext>", "<annotation-xml encoding='text/html'>", "</annotation-xml>",
         "<math>", "</math>", "<mglyph>", "<malignmark>"]
_TEXT = ["a", " ", "<", "&", "\x00", "\r", "\u00e9", "\u20ac", "\U0001f600", "\x0c", "\t", "\ufffd"]


def _some(rng: random.Random, most: int, draw: Callable[[random.Random], str]) -> str:
    """Up to `most` drawn parts, joined."""
    return "".join(draw(rng) for _ in range(rng.randint(0, most)))


def _value(rng: random.Random) -> str:
    return _some(rng, 5, lambda r: r.choice(_VALUE_PARTS))


def _attribute(rng: random.Random) -> str:
    space, name = rng.choice([" ", "\n", "/", "", "  "]), rng.choice(_ATTR_NAMES)
    eq = rng.choice(["", "=", " = "])
    if not eq:
        return space + name
    quote = rng.choice(["", "'", '"'])
    value = rng.choice(_META_NAMES) if name == "name" and rng.random() < 0.5 else _value(rng)
    return f"{space}{name}{eq}{quote}{value}{quote}"


def _tag(rng: random.Random) -> str:
    return (rng.choice(["<", "</"]) + rng.choice(_TAG_NAMES) + " " + _some(rng, 4, _attribute)
            + rng.choice([">", ">", "/>", " >", ""]))


def _text(rng: random.Random) -> str:
    if rng.random() < 0.1:
        return chr(rng.choice([rng.randrange(0x20, 0xD800), rng.randrange(0xE000, 0x110000)]))
    return _some(rng, 4, lambda r: r.choice(_TEXT))


def _raw(rng: random.Random) -> str:
    name = rng.choice(_RAW_NAMES)
    inside = _some(rng, 3, lambda r: _tag(r) if r.random() < 0.5 else r.choice(_OTHER))
    return f"<{name}>{inside}{rng.choice(_RAW_ENDS).format(name.lower())}"


def _table(rng: random.Random) -> str:
    return "<table>" + _some(rng, 12, lambda r: r.choice(_TABLE_TAGS) if r.random() < 0.5 else _tag(r))


def _foreign(rng: random.Random) -> str:
    svg = rng.random() < 0.8
    own = _SVG if svg else _MATH
    def part(r: random.Random) -> str:
        x = r.random()
        return (r.choice(own) if x < 0.6 else r.choice(_FOREIGN_QUIET) if x < 0.9
                else r.choice(_FOREIGN_LOUD) if x < 0.95 else r.choice(["<svg>", "</svg>", "</SVG >"]) if x < 0.98
                else _tag(r))

    parts = _some(rng, 6, part)
    head = rng.choice(["<svg viewBox='0 0 1 1'>", "<svg>", "<SVG>"]) if svg else "<math>"
    end = rng.choice(["</svg>", "</svg>", "</svg >", ""] if svg else ["</math>", ""])
    return head + parts + end + (rng.choice(_FOREIGN_AFTER) if rng.random() < 0.5 else "")


_PARTS = [_tag, _tag, _tag, _tag, lambda r: r.choice(_OTHER), _raw, _table, _foreign, _text]


def random_page(rng: random.Random) -> str:
    """A page of up to 30 parts (see the module docstring); one in four holds a rare element in its middle."""
    page = _some(rng, 30, lambda r: r.choice(_PARTS)(r))
    if rng.random() < 0.25:
        page += rng.choice(_RARE) + _some(rng, 30, lambda r: r.choice(_PARTS)(r))
    return page


def random_table_page(rng: random.Random) -> str:
    """Up to 16 table tags and distinct links."""
    return _some(rng, 16, lambda r: r.choice(_TABLE_TAGS) if r.random() < 0.5 else f"<a href={r.randrange(100)}>")
