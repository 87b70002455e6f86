/* The tokenizer of workers/_linkscan.c for one string kind: included once per CH (Py_UCS1, 2, 4) as SCAN.
   Returns 0 done, 1 fall back (a construct it does not follow), -1 a Python error. */

#define LS_CAT2(a, b) a##b
#define LS_CAT(a, b) LS_CAT2(a, b)
#define LS_FIND LS_CAT(SCAN, _find)
#define LS_TAG LS_CAT(SCAN, _tag)
#define LS_RAW LS_CAT(SCAN, _raw_end)
#define LS_COMMENT LS_CAT(SCAN, _comment_end)
#define LS_SVG LS_CAT(SCAN, _svg_end)

/* Where text[i:] holds `c` first, or n (also when i is past the end). */
static Py_ssize_t LS_FIND(const CH *s, Py_ssize_t n, Py_ssize_t i, CH c) {
    if (sizeof(CH) == 1) {
        const void *hit = i < n ? memchr(s + i, (int)c, (size_t)(n - i)) : NULL;
        return hit ? (const CH *)hit - s : n;
    }
    while (i < n && s[i] != c) i++;
    return i < n ? i : n;
}

/* The end of a raw text element named `name`: the index of the "<" of "</name" followed by a space, "/" or
   ">" (any case), or n. `script`: "<!--" before it falls back (-2): the script data escaped states. */
static Py_ssize_t LS_RAW(const CH *s, Py_ssize_t n, Py_ssize_t i, const char *name, int len, int script) {
    for (;; i++) {
        i = LS_FIND(s, n, i, '<');
        if (i >= n) return n;
        if (script && i + 3 < n && s[i + 1] == '!' && s[i + 2] == '-' && s[i + 3] == '-') return -2;
        if (i + 2 + len > n || s[i + 1] != '/') continue;
        int k = 0;
        while (k < len && lower(s[i + 2 + k]) == (Py_UCS4)name[k]) k++;
        if (k < len) continue;
        if (i + 2 + len == n) return n;
        Py_UCS4 after = s[i + 2 + len];
        if (is_space(after) || after == '/' || after == '>') return i;
    }
}

/* One tag from text[*at] (its name's first letter) to its ">": *at becomes the index after it, or n when the
   file ends inside the tag (which emits nothing). Its kind (lower-cased name) and the spans of the
   attributes we read (first of each name wins, as the tokenizer drops duplicates) go to *kind and *attrs.
   Returns 1 if the tag was emitted. */
static int LS_TAG(const CH *s, Py_ssize_t n, Py_ssize_t *at, enum tag_kind *kind, Attrs *attrs,
                  char *tag, int *tag_len) {
    char name[NAME_LEN + 1];
    int name_len = 0, state = S_NAME, slot = A_OTHER;
    *tag_len = 0;
    for (int k = 0; k < A_SLOTS; k++) attrs->start[k] = attrs->end[k] = -1;
    Py_ssize_t i = *at, value = 0;
#define LS_START_ATTR() (name_len = 0)
    /* counts stop at NAME_LEN + 1 (a name too long to be ours): a 2^31-character name cannot wrap them */
#define LS_NAME_CHAR(c) do { if (name_len <= NAME_LEN) name[name_len++] = (char)((c) < 128 ? lower(c) : 0x7f); \
                           } while (0)
    /* the attribute's name is complete: its slot, unless an earlier attribute had the name (then it is dropped) */
#define LS_END_NAME() do { slot = name_len <= NAME_LEN ? attr_slot(name, name_len) : A_OTHER; \
                           if (slot != A_OTHER && attrs->start[slot] >= 0) slot = A_OTHER; \
                           else if (slot != A_OTHER) attrs->start[slot] = attrs->end[slot] = i; } while (0)
#define LS_SET_VALUE(from, to) do { if (slot != A_OTHER) { attrs->start[slot] = (from); attrs->end[slot] = (to); } \
                                  } while (0)
    for (; i < n; i++) {
        CH c = s[i];
        switch (state) {
        case S_NAME:
            if (is_space(c)) state = S_BEFORE_ATTR;
            else if (c == '/') state = S_SELF_CLOSING;
            else if (c == '>') goto emit;
            else {
                if (*tag_len <= NAME_LEN) tag[(*tag_len)++] = (char)(c < 128 ? lower(c) : 0x7f);
            }
            break;
        case S_BEFORE_ATTR:
            if (is_space(c)) break;
            if (c == '/') state = S_SELF_CLOSING;
            else if (c == '>') goto emit;
            else { LS_START_ATTR(); LS_NAME_CHAR(c); state = S_ATTR; }  /* "=" starts a name too */
            break;
        case S_ATTR:
            if (is_space(c)) { LS_END_NAME(); state = S_AFTER_ATTR; }
            else if (c == '/') { LS_END_NAME(); state = S_SELF_CLOSING; }
            else if (c == '>') { LS_END_NAME(); goto emit; }
            else if (c == '=') { LS_END_NAME(); state = S_BEFORE_VALUE; }
            else LS_NAME_CHAR(c);
            break;
        case S_AFTER_ATTR:
            if (is_space(c)) break;
            if (c == '/') state = S_SELF_CLOSING;
            else if (c == '=') state = S_BEFORE_VALUE;
            else if (c == '>') goto emit;
            else { LS_START_ATTR(); LS_NAME_CHAR(c); state = S_ATTR; }
            break;
        case S_BEFORE_VALUE:
            if (is_space(c)) break;
            if (c == '"') { state = S_VALUE_DQ; value = i + 1; }
            else if (c == '\'') { state = S_VALUE_SQ; value = i + 1; }
            else if (c == '>') goto emit;
            else { state = S_VALUE_UQ; value = i; }
            break;
        case S_VALUE_DQ:
        case S_VALUE_SQ:
            i = LS_FIND(s, n, i, state == S_VALUE_DQ ? '"' : '\'');
            if (i >= n) goto eof;
            LS_SET_VALUE(value, i);
            state = S_AFTER_VALUE;
            break;
        case S_VALUE_UQ:
            if (is_space(c)) { LS_SET_VALUE(value, i); state = S_BEFORE_ATTR; }
            else if (c == '>') { LS_SET_VALUE(value, i); goto emit; }
            break;
        case S_AFTER_VALUE:
            if (is_space(c)) state = S_BEFORE_ATTR;
            else if (c == '/') state = S_SELF_CLOSING;
            else if (c == '>') goto emit;
            else { state = S_BEFORE_ATTR; i--; }
            break;
        case S_SELF_CLOSING:
            if (c == '>') goto emit;
            state = S_BEFORE_ATTR;
            i--;
            break;
        }
    }
eof:
    *at = n;
    return 0;
emit:
    *at = i + 1;
    *kind = *tag_len <= NAME_LEN ? tag_kind(tag, *tag_len) : T_OTHER;
    return 1;
#undef LS_START_ATTR
#undef LS_NAME_CHAR
#undef LS_END_NAME
#undef LS_SET_VALUE
}

/* The index after a comment whose text starts at text[i] (after "<!--"): it ends at "-->", "--!>", or at once
   with ">" or "->" ("<!-->", "<!--->"); n if the file ends first. */
static Py_ssize_t LS_COMMENT(const CH *s, Py_ssize_t n, Py_ssize_t i) {
    if (i < n && s[i] == '>') return i + 1;
    if (i + 1 < n && s[i] == '-' && s[i + 1] == '>') return i + 2;
    for (;; i++) {
        i = LS_FIND(s, n, i, '-');
        if (i + 2 >= n) return n;
        if (s[i + 1] != '-') continue;
        Py_ssize_t j = i + 2;
        while (j < n && s[j] == '-') j++;  /* "---->" ends it too */
        if (j < n && s[j] == '>') return j + 1;
        if (j + 1 < n && s[j] == '!' && s[j + 1] == '>') return j + 2;
        i = j - 1;
    }
}

/* An inline <svg> whose content starts at text[i]: the index after its "</svg>" when everything up to it is
   plain_svg_element tags, comments, "<?" bogus comments (to the next ">", which may hide a "</svg>") and text
   (the tree builder stays in foreign content, and no link is in it); -1 otherwise (CDATA, another element, a
   nested svg, the file ends first): the caller gives the page back. */
static Py_ssize_t LS_SVG(const CH *s, Py_ssize_t n, Py_ssize_t i) {
    char tag[NAME_LEN + 1];
    int tag_len;
    enum tag_kind kind;
    Attrs attrs;
    for (;;) {
        i = LS_FIND(s, n, i, '<') + 1;
        if (i >= n) return -1;
        CH c = s[i];
        if (c == '!') {
            if (i + 2 < n && s[i + 1] == '-' && s[i + 2] == '-') { i = LS_COMMENT(s, n, i + 3); continue; }
            return -1;  /* CDATA is a real section in foreign content */
        }
        if (c == '?') { i = LS_FIND(s, n, i, '>') + 1; continue; }
        int end_tag = c == '/';
        if (end_tag) {
            if (i + 1 >= n || !is_alpha(s[i + 1])) return -1;
            i++;
        } else if (!is_alpha(c)) {
            continue;  /* a "<" that is text */
        }
        if (!LS_TAG(s, n, &i, &kind, &attrs, tag, &tag_len)) return -1;
        if (tag_len > NAME_LEN || !plain_svg_element(tag, tag_len)) return -1;
        if (name_is(tag, tag_len, "svg")) return end_tag ? i : -1;
    }
}

static int SCAN(Scan *sc, const CH *s, Py_ssize_t n) {
    Py_ssize_t i = 0;
    char tag[NAME_LEN + 1];
    int tag_len;
    Attrs attrs;
    for (;;) {
        i = LS_FIND(s, n, i, '<') + 1;
        if (i >= n) return 0;
        CH c = s[i];
        if (c == '!') {
            if (i + 2 < n && s[i + 1] == '-' && s[i + 2] == '-') {
                i = LS_COMMENT(s, n, i + 3);
                if (i >= n) return 0;
                continue;
            }
            i = LS_FIND(s, n, i, '>') + 1;  /* DOCTYPE, CDATA (a bogus comment in HTML content), bogus comment */
            continue;
        }
        if (c == '?') { i = LS_FIND(s, n, i, '>') + 1; continue; }
        int end_tag = c == '/';
        if (end_tag) {
            if (i + 1 >= n) return 0;
            c = s[++i];
            if (c == '>') { i++; continue; }
            if (!is_alpha(c)) { i = LS_FIND(s, n, i, '>') + 1; continue; }
        } else if (!is_alpha(c)) {
            continue;  /* a "<" that is text */
        }
        enum tag_kind kind = T_OTHER;
        if (!LS_TAG(s, n, &i, &kind, &attrs, tag, &tag_len)) return 0;
        if (kind == T_OTHER) continue;
        if (kind >= T_TABLE) {
            if (on_table_tag(sc, kind, end_tag)) return 1;
            continue;
        }
        if (end_tag) continue;
        if (kind == T_FALLBACK) return 1;
        if (kind == T_SVG) {
            i = LS_SVG(s, n, i);
            if (i < 0) return 1;
            continue;
        }
        if (kind == T_PLAINTEXT) return 0;
        if (kind == T_SCRIPT || kind == T_RAWTEXT) {
            Py_ssize_t end = LS_RAW(s, n, i, tag, tag_len, kind == T_SCRIPT);
            if (end == -2) return 1;
            i = end;
            if (i >= n) return 0;
            continue;
        }
        int rc = on_element(sc, kind, &attrs);
        if (rc) return rc;
    }
}

#undef LS_FIND
#undef LS_TAG
#undef LS_RAW
#undef LS_COMMENT
#undef LS_SVG
#undef LS_CAT
#undef LS_CAT2
