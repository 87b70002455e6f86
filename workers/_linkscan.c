/* workers._linkscan: the links of an HTML page in one pass over its text, without building a DOM.

   scan(text: str, limit: int = -1) -> (hrefs, rels, base, metas, count) | None

   hrefs: the href of each <a href> / <area href> start tag, in document order; rels: their rel values (None
   where absent), or None when no such tag has a rel; base: the href of the first <base href>, or None; metas:
   (name, content or None) of each <meta name> whose name could be "robots" (stripped, any case, or holding a
   "&" that may decode to it); count: the <a href> / <area href> tags of the page. With `limit` >= 0, hrefs
   and metas stop at `limit` items (a hostile page's millions of links cost a count, not a list). Attribute
   values are as written but for newlines (CR LF and CR become LF, as the HTML preprocessor does) and NUL (U+FFFD,
   as the tokenizer writes it): character references ("&amp;") are left for the caller.

   The tokenizer is the WHATWG HTML one (tag, attribute, comment, DOCTYPE, bogus-comment states; RAWTEXT,
   RCDATA, script data and PLAINTEXT elements switched as the tree builder switches them in the body), and a
   tag the tokenizer emits is an element the tree builder makes, in the same order, except where the tree
   builder moves or drops elements or changes the tokenizer's state. Those pages get None, and the caller
   parses them with a full HTML parser: <template>, <math>, <select>, <frameset>; an <svg> holding anything but
   plain shapes, text, comments and "<?" bogus comments (an icon's <svg> is skipped whole); a script holding
   "<!--" (the script data escaped states); and a link, <base>, <meta name> or <table> where the tree builder
   would foster-parent it (directly in a table, outside a cell or caption), per a small model of the open table
   elements. A NUL is what the tokenizer makes of it: U+FFFD in a name or value (so no name of ours), and in
   text, comments and raw text nothing that moves a tag. workers/links.py checks that the links equal the full
   parser's on real sites and generated pages (tests/test_linkscan.py, python -m frontier.bench fuzz-links).

   No state between calls: a pure function of `text`, safe from any thread (it holds the GIL). */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

#define LINKSCAN_VERSION 2
#define TABLE_DEPTH 64 /* open tables and cells modelled; deeper nesting falls back */
#define NAME_LEN 17    /* tag and attribute names compared; longer ones are none of ours */

enum tag_kind { T_OTHER, T_A, T_AREA, T_BASE, T_META, T_SCRIPT, T_RAWTEXT, T_PLAINTEXT, T_FALLBACK, T_SVG,
                T_TABLE, T_CELL, T_ROW };
enum attr_slot { A_HREF, A_REL, A_NAME, A_CONTENT, A_SLOTS, A_OTHER = A_SLOTS };

enum { S_NAME, S_BEFORE_ATTR, S_ATTR, S_AFTER_ATTR, S_BEFORE_VALUE, S_VALUE_DQ, S_VALUE_SQ, S_VALUE_UQ,
       S_AFTER_VALUE, S_SELF_CLOSING }; /* the tokenizer's tag states */

typedef struct {
    Py_ssize_t start[A_SLOTS], end[A_SLOTS]; /* value spans; start -1: attribute absent */
} Attrs;

typedef struct {
    PyObject *text, *hrefs, *rels, *base, *metas;
    Py_ssize_t limit, count; /* limit: items kept in hrefs and metas (-1: all); count: link tags seen */
    int any_rel;
    char table[TABLE_DEPTH]; /* 'T' a table, 'C' a cell or caption */
    int depth;
} Scan;

static int is_space(Py_UCS4 c) { return c == ' ' || c == '\n' || c == '\t' || c == '\f' || c == '\r'; }
static int is_alpha(Py_UCS4 c) { return (c | 0x20) >= 'a' && (c | 0x20) <= 'z'; }
static Py_UCS4 lower(Py_UCS4 c) { return c >= 'A' && c <= 'Z' ? c | 0x20 : c; }

static int name_is(const char *name, int len, const char *want) {
    return len == (int)strlen(want) && memcmp(name, want, len) == 0;
}

static enum tag_kind tag_kind(const char *name, int len) {
    static const struct { const char *name; enum tag_kind kind; } kinds[] = {
        {"a", T_A}, {"area", T_AREA}, {"base", T_BASE}, {"meta", T_META}, {"script", T_SCRIPT},
        {"style", T_RAWTEXT}, {"xmp", T_RAWTEXT}, {"iframe", T_RAWTEXT}, {"noembed", T_RAWTEXT},
        {"noframes", T_RAWTEXT}, {"textarea", T_RAWTEXT}, {"title", T_RAWTEXT}, {"plaintext", T_PLAINTEXT},
        {"template", T_FALLBACK}, {"svg", T_SVG}, {"math", T_FALLBACK}, {"select", T_FALLBACK},
        {"frameset", T_FALLBACK}, {"table", T_TABLE}, {"td", T_CELL}, {"th", T_CELL}, {"caption", T_CELL},
        {"tr", T_ROW}, {"tbody", T_ROW}, {"thead", T_ROW}, {"tfoot", T_ROW}, {"col", T_ROW}, {"colgroup", T_ROW}};
    if (len > NAME_LEN) return T_OTHER;
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
        if (name_is(name, len, kinds[i].name)) return kinds[i].kind;
    return T_OTHER;
}

/* SVG elements that hold no link and leave foreign content as it is (no HTML integration point, no breakout,
   no raw text): an inline <svg> made of them alone, icons mostly, is skipped whole. */
static int plain_svg_element(const char *name, int len) {
    static const char *const names[] = {
        "svg", "path", "g", "circle", "rect", "line", "polyline", "polygon", "ellipse", "defs", "use", "symbol",
        "lineargradient", "radialgradient", "stop", "clippath", "mask", "pattern", "filter", "text", "tspan",
        "marker", "image", "feblend", "fecolormatrix", "fecomposite", "feflood", "fegaussianblur", "femerge",
        "femergenode", "feoffset", "femorphology", "feturbulence", "fedropshadow", "fedisplacementmap"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (name_is(name, len, names[i])) return 1;
    return 0;
}

static enum attr_slot attr_slot(const char *name, int len) {
    if (name_is(name, len, "href")) return A_HREF;
    if (name_is(name, len, "rel")) return A_REL;
    if (name_is(name, len, "name")) return A_NAME;
    if (name_is(name, len, "content")) return A_CONTENT;
    return A_OTHER;
}

/* `text` with every `from` written as `to` (steals `text`); NULL on error. */
static PyObject *replaced(PyObject *text, const char *from, const char *to) {
    if (text == NULL) return NULL;
    PyObject *f = PyUnicode_FromString(from), *t = PyUnicode_FromString(to), *out = NULL;
    if (f && t) out = PyUnicode_Replace(text, f, t, -1);
    Py_XDECREF(f); Py_XDECREF(t); Py_DECREF(text);
    return out;
}

/* 1 if text[from:to] holds `c`, 0 if not, -1 on error. */
static int holds(PyObject *text, Py_UCS4 c, Py_ssize_t from, Py_ssize_t to) {
    Py_ssize_t at = PyUnicode_FindChar(text, c, from, to, 1);
    return at == -2 ? -1 : at >= 0;
}

/* The attribute value text[start:end] with CR LF and lone CR as LF and NUL as U+FFFD; NULL on error. */
static PyObject *value_of(Scan *sc, Py_ssize_t start, Py_ssize_t end) {
    int cr = holds(sc->text, '\r', start, end), nul = holds(sc->text, 0, start, end);
    if (cr < 0 || nul < 0) return NULL;
    PyObject *out = PyUnicode_Substring(sc->text, start, end);
    if (cr) out = replaced(replaced(out, "\r\n", "\n"), "\r", "\n");
    if (nul) {
        PyObject *zero = PyUnicode_FromOrdinal(0), *fffd = PyUnicode_FromOrdinal(0xFFFD), *step = NULL;
        if (out && zero && fffd) step = PyUnicode_Replace(out, zero, fffd, -1);
        Py_XDECREF(zero); Py_XDECREF(fffd); Py_XDECREF(out);
        out = step;
    }
    return out;
}

/* 1 if a <meta> named `name` (as written) could be a robots meta: "robots" stripped and in any case, or a "&"
   that may decode to it; 0 if not, -1 on error. */
static int maybe_robots(PyObject *name) {
    int amp = holds(name, '&', 0, PyUnicode_GET_LENGTH(name));
    if (amp) return amp;
    PyObject *stripped = PyObject_CallMethod(name, "strip", NULL);
    PyObject *low = stripped ? PyObject_CallMethod(stripped, "lower", NULL) : NULL;
    int rc = low ? PyUnicode_CompareWithASCIIString(low, "robots") == 0 : -1;
    Py_XDECREF(stripped); Py_XDECREF(low);
    return rc;
}

static PyObject *value_or_none(Scan *sc, const Attrs *at, enum attr_slot slot) {
    if (at->start[slot] < 0) Py_RETURN_NONE;
    return value_of(sc, at->start[slot], at->end[slot]);
}

static int append_new(PyObject *list, PyObject *item) { /* steals item */
    if (item == NULL) return -1;
    int rc = PyList_Append(list, item);
    Py_DECREF(item);
    return rc;
}

/* A start tag of a link, <base> or <meta> was emitted: record it. -1 error, 1 fall back, 0 go on. */
static int on_element(Scan *sc, enum tag_kind kind, const Attrs *at) {
    int recorded = kind != T_META || at->start[A_NAME] >= 0;
    if (recorded && sc->depth && sc->table[sc->depth - 1] == 'T')
        return 1; /* foster-parented: it moves before the table in document order */
    if (kind == T_A || kind == T_AREA) {
        if (at->start[A_HREF] < 0) return 0;
        if (++sc->count > sc->limit && sc->limit >= 0) return 0;
        if (append_new(sc->hrefs, value_of(sc, at->start[A_HREF], at->end[A_HREF])) < 0) return -1;
        if (at->start[A_REL] >= 0) sc->any_rel = 1;
        return append_new(sc->rels, value_or_none(sc, at, A_REL));
    }
    if (kind == T_BASE) {
        if (at->start[A_HREF] < 0 || sc->base != Py_None) return 0;
        PyObject *href = value_of(sc, at->start[A_HREF], at->end[A_HREF]);
        if (href == NULL) return -1;
        Py_SETREF(sc->base, href);
        return 0;
    }
    if (kind == T_META && at->start[A_NAME] >= 0) {
        if (sc->limit >= 0 && PyList_GET_SIZE(sc->metas) >= sc->limit) return 0;
        PyObject *name = value_of(sc, at->start[A_NAME], at->end[A_NAME]);
        int robots = name ? maybe_robots(name) : -1;
        if (robots <= 0) { Py_XDECREF(name); return robots; }
        PyObject *content = value_or_none(sc, at, A_CONTENT);
        PyObject *pair = content ? PyTuple_Pack(2, name, content) : NULL;
        Py_XDECREF(name); Py_XDECREF(content);
        return append_new(sc->metas, pair);
    }
    return 0;
}

/* The open tables and cells, as far as foster parenting needs them. 1: a construct the model does not
   follow (fall back), 0: go on. */
static int on_table_tag(Scan *sc, enum tag_kind kind, int end_tag) {
    char top = sc->depth ? sc->table[sc->depth - 1] : 0;
    if (!end_tag) {
        if (kind == T_TABLE) {
            if (top == 'T' || sc->depth == TABLE_DEPTH) return 1; /* a table directly in a table closes it */
            sc->table[sc->depth++] = 'T';
        } else if (kind == T_CELL) {
            if (top == 'C') sc->depth--;  /* a cell in a cell closes the first (a cell sits on its table) */
            if (sc->depth == TABLE_DEPTH) return 1;
            if (sc->depth) sc->table[sc->depth++] = 'C';
        } else if (kind == T_ROW && top == 'C') {
            sc->depth--;  /* a row, a row group or a column closes the cell or caption */
        }
        return 0;
    }
    if (kind == T_CELL || kind == T_ROW) {
        if (top == 'C') sc->depth--;
    } else if (kind == T_TABLE) {
        while (sc->depth && sc->table[--sc->depth] != 'T') {}
    }
    return 0;
}

#define CH Py_UCS1
#define SCAN scan_ucs1
#include "_linkscan_impl.h"
#undef CH
#undef SCAN
#define CH Py_UCS2
#define SCAN scan_ucs2
#include "_linkscan_impl.h"
#undef CH
#undef SCAN
#define CH Py_UCS4
#define SCAN scan_ucs4
#include "_linkscan_impl.h"
#undef CH
#undef SCAN

static PyObject *scan(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    Py_ssize_t limit = -1;
    if (nargs < 1 || nargs > 2) {
        PyErr_Format(PyExc_TypeError, "scan() takes 1 or 2 arguments (%zd given)", nargs);
        return NULL;
    }
    if (nargs == 2 && (limit = PyLong_AsSsize_t(args[1])) == -1 && PyErr_Occurred()) return NULL;
    PyObject *text = args[0];
    if (!PyUnicode_Check(text)) {
        PyErr_Format(PyExc_TypeError, "scan() takes a str, not %.80s", Py_TYPE(text)->tp_name);
        return NULL;
    }
    if (PyUnicode_READY(text) < 0) return NULL;
    Scan sc = {.text = text, .hrefs = PyList_New(0), .rels = PyList_New(0), .base = Py_NewRef(Py_None),
               .metas = PyList_New(0), .limit = limit < 0 ? -1 : limit};
    PyObject *out = NULL;
    if (sc.hrefs && sc.rels && sc.metas) {
        Py_ssize_t n = PyUnicode_GET_LENGTH(text);
        const void *data = PyUnicode_DATA(text);
        int rc;
        switch (PyUnicode_KIND(text)) {
        case PyUnicode_1BYTE_KIND: rc = scan_ucs1(&sc, data, n); break;
        case PyUnicode_2BYTE_KIND: rc = scan_ucs2(&sc, data, n); break;
        default: rc = scan_ucs4(&sc, data, n); break;
        }
        if (rc == 1) out = Py_NewRef(Py_None);
        else if (rc == 0) out = Py_BuildValue("(OOOOn)", sc.hrefs, sc.any_rel ? sc.rels : Py_None, sc.base, sc.metas,
                                              sc.count);
    }
    Py_XDECREF(sc.hrefs); Py_XDECREF(sc.rels); Py_XDECREF(sc.base); Py_XDECREF(sc.metas);
    return out;
}

static PyMethodDef methods[] = {
    {"scan", (PyCFunction)(void (*)(void))scan, METH_FASTCALL,
     "scan(text, limit=-1) -> (hrefs, rels, base, metas, count), or None: parse this page fully"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "workers._linkscan",
                                    "The links of an HTML page in one tokenizer pass (see workers/links.py).", -1,
                                    methods};

PyMODINIT_FUNC PyInit__linkscan(void) {
    PyObject *m = PyModule_Create(&module);
    if (m != NULL && PyModule_AddIntConstant(m, "VERSION", LINKSCAN_VERSION) < 0) Py_CLEAR(m);
    return m;
}
