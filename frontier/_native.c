/* frontier._native: the per-item loops of the filters' batch operations, in C.
 *
 * Optional: setup.py builds it when a compiler is there, and frontier.positions.native() falls back to the
 * numpy path without it (or with FRONTIER_NO_NATIVE=1). Both paths compute the same positions (the math is
 * frontier/positions.py's, documented there), so a filter or snapshot written by one is read by the other.
 *
 * A batch of fingerprints is one contiguous buffer of n x 16 bytes (b"".join of the digests). A filter is a
 * tuple (buffer, cell_bits, cells_per_partition, hashes): cell_bits 1 is a bit array (SharedBloom generation,
 * Blacklist; bit j is bit j%8 of byte j//8), 4 an array of 4-bit counters (CountingBloom; counter j is the low
 * nibble of byte j//2 when j is even). Big filters are memory-bound: every loop computes the positions of the
 * item WINDOW places ahead and prefetches their cache lines, so the misses of several items overlap. A blocked
 * filter (the blacklist's layout 2, frontier/blocked.py) is a tuple (buffer, blocks, hashes): an item's bits
 * lie in one 64-byte block, one cache line, prefetched BLOCK_WINDOW items ahead.
 *
 * Locking stays in Python: a writer calls these while it holds its partitions' locks. The GIL is released
 * around the loops of large batches; the Py_buffer views held meanwhile keep the mappings alive.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define XXH_INLINE_ALL
#include "vendor/xxhash.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "frontier._native reads the filters' little-endian counts in place: a little-endian CPU is needed"
#endif

#define FP 16
#define MAX_HASHES 64
#ifndef WINDOW
#define WINDOW 8            /* items ahead whose cache lines are prefetched */
#endif
#define NOGIL_FROM 256      /* items from which a loop releases the GIL */
#define NO_GEN 255          /* place(): an item that is not placed */

/* Release the GIL for a loop over n items, if n is large enough to pay for it; NULL if kept. */
static inline PyThreadState *release_gil(Py_ssize_t n)
{
    return n >= NOGIL_FROM ? PyEval_SaveThread() : NULL;
}

static inline void restore_gil(PyThreadState *state)
{
    if (state != NULL)
        PyEval_RestoreThread(state);
}

typedef struct {
    uint64_t stride, b, base;
} Key;

typedef struct {
    Py_buffer view;
    unsigned char *u8;
    int cell_bits;          /* 1 or 4 */
    uint64_t part_size;     /* cells per partition, < 2^32 */
    int hashes;
} Filter;

static inline uint64_t load_be64(const unsigned char *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return __builtin_bswap64(v);
}

/* positions.keys + the partition's first cell */
static inline Key key_of(const unsigned char *fp, int pbits, uint64_t part_size)
{
    uint64_t a = load_be64(fp);
    Key k;
    k.b = load_be64(fp + 8);
    k.stride = (a << pbits) | 1u;
    k.base = (pbits ? a >> (64 - pbits) : 0) * part_size;
    return k;
}

/* positions.positions: Kirsch-Mitzenmacher h_i = b + i*s (mod 2^64), reduced by Lemire's multiply-shift */
static inline void positions_of(Key k, uint64_t part_size, int hashes, uint64_t *out)
{
    uint64_t h = k.b;
    for (int i = 0; i < hashes; i++, h += k.stride)
        out[i] = k.base + (((h >> 32) * part_size) >> 32);
}

static inline int partition_of(const unsigned char *fp, int pbits)
{
    return pbits ? (int)(load_be64(fp) >> (64 - pbits)) : 0;
}

static inline const void *cell_address(const Filter *f, uint64_t pos)
{
    return f->u8 + (f->cell_bits == 1 ? pos >> 3 : pos >> 1);
}

static inline unsigned cell(const Filter *f, uint64_t pos)
{
    if (f->cell_bits == 1)
        return (f->u8[pos >> 3] >> (pos & 7)) & 1u;
    return (f->u8[pos >> 1] >> ((pos & 1) << 2)) & 0xFu;
}

/* -- argument parsing ------------------------------------------------------------------------------- */

static int get_fps(PyObject *obj, Py_buffer *view, Py_ssize_t *n)
{
    if (PyObject_GetBuffer(obj, view, PyBUF_SIMPLE) < 0)
        return -1;
    if (view->len % FP) {
        PyErr_Format(PyExc_ValueError, "fingerprints: %zd bytes is not a multiple of %d", view->len, FP);
        PyBuffer_Release(view);
        return -1;
    }
    *n = view->len / FP;
    return 0;
}

static int check_pbits(int pbits)
{
    if (pbits < 0 || pbits > 32) {
        PyErr_Format(PyExc_ValueError, "partition bits must be in [0, 32], got %d", pbits);
        return -1;
    }
    return 0;
}

/* A buffer of exactly `n` items of `size` bytes (a mask, a count array); writable if asked. */
static int get_array(PyObject *obj, Py_buffer *view, Py_ssize_t n, Py_ssize_t size, int writable, const char *what)
{
    if (PyObject_GetBuffer(obj, view, writable ? PyBUF_WRITABLE : PyBUF_SIMPLE) < 0)
        return -1;
    if (view->len != n * size) {
        PyErr_Format(PyExc_ValueError, "%s: %zd bytes, expected %zd", what, view->len, n * size);
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

/* A filter tuple (buffer, cell_bits, cells_per_partition, hashes) whose buffer holds 2^pbits partitions. */
static int get_filter(PyObject *spec, int pbits, int writable, Filter *f)
{
    PyObject *buf;
    unsigned long long part_size;
    if (!PyArg_ParseTuple(spec, "OiKi;a filter is (buffer, cell_bits, cells_per_partition, hashes)", &buf,
                          &f->cell_bits, &part_size, &f->hashes))
        return -1;
    if (f->cell_bits != 1 && f->cell_bits != 4) {
        PyErr_Format(PyExc_ValueError, "cell_bits must be 1 or 4, got %d", f->cell_bits);
        return -1;
    }
    if (part_size < 1 || part_size >= (1ULL << 32) || f->hashes < 1 || f->hashes > MAX_HASHES) {
        PyErr_Format(PyExc_ValueError, "a partition of %llu cells (below 2^32) and 1..%d hashes expected, got %d",
                     part_size, MAX_HASHES, f->hashes);
        return -1;
    }
    f->part_size = part_size;
    if (PyObject_GetBuffer(buf, &f->view, writable ? PyBUF_WRITABLE : PyBUF_SIMPLE) < 0)
        return -1;
    uint64_t cells = ((uint64_t)1 << pbits) * part_size;
    if ((uint64_t)f->view.len < (cells * (uint64_t)f->cell_bits + 7) / 8) {
        PyErr_Format(PyExc_ValueError, "filter buffer of %zd bytes is smaller than %llu cells of %d bits",
                     f->view.len, (unsigned long long)cells, f->cell_bits);
        PyBuffer_Release(&f->view);
        return -1;
    }
    f->u8 = f->view.buf;
    return 0;
}

/* -- kernels ---------------------------------------------------------------------------------------- */

/* found[i] |= every cell of item i is nonzero, for the items not found yet */
static void test_filter(const unsigned char *fps, Py_ssize_t n, int pbits, const Filter *f, unsigned char *found)
{
    uint64_t ring[WINDOW][MAX_HASHES];
    const int k = f->hashes;
    for (Py_ssize_t i = 0; i < n + WINDOW; i++) {
        Py_ssize_t j = i - WINDOW;  /* first the item leaving the window: its slot is i's */
        if (j >= 0 && !found[j]) {
            const uint64_t *pos = ring[j % WINDOW];
            int all = 1;
            for (int h = 0; h < k && all; h++)
                all = cell(f, pos[h]) != 0;
            found[j] = (unsigned char)all;
        }
        if (i < n && !found[i]) {
            uint64_t *pos = ring[i % WINDOW];
            positions_of(key_of(fps + i * FP, pbits, f->part_size), f->part_size, k, pos);
            for (int h = 0; h < k; h++)
                __builtin_prefetch(cell_address(f, pos[h]), 0);
        }
    }
}

/* For the items with select[i] == value: set their bits (1-bit cells), or add step (+1/-1) to their counters
 * (4-bit cells; 15 is saturated: never changed again; 0 stays 0), once per occurrence of a position. */
static void update_filter(const unsigned char *fps, Py_ssize_t n, int pbits, const Filter *f,
                          const unsigned char *select, unsigned char value, int step)
{
    uint64_t ring[WINDOW][MAX_HASHES];
    const int k = f->hashes;
    unsigned char *u8 = f->u8;
    for (Py_ssize_t i = 0; i < n + WINDOW; i++) {
        Py_ssize_t j = i - WINDOW;  /* first the item leaving the window: its slot is i's */
        if (j >= 0 && select[j] == value) {
            const uint64_t *pos = ring[j % WINDOW];
            for (int h = 0; h < k; h++) {
                if (f->cell_bits == 1) {
                    u8[pos[h] >> 3] |= (unsigned char)(1u << (pos[h] & 7));
                    continue;
                }
                unsigned shift = (unsigned)(pos[h] & 1) << 2;
                unsigned char *byte = u8 + (pos[h] >> 1);
                unsigned c = (*byte >> shift) & 0xFu;
                unsigned next = c == 15 ? 15 : step > 0 ? c + 1 : c ? c - 1 : 0;
                *byte = (unsigned char)((*byte & ~(0xFu << shift)) | (next << shift));
            }
        }
        if (i < n && select[i] == value) {
            uint64_t *pos = ring[i % WINDOW];
            positions_of(key_of(fps + i * FP, pbits, f->part_size), f->part_size, k, pos);
            for (int h = 0; h < k; h++)
                __builtin_prefetch(cell_address(f, pos[h]), 1);
        }
    }
}

/* Check-and-add of a bit filter in one pass, item by item: new[i] = some bit of item i was unset (then set).
 * A repeat later in the batch, or an item whose bits earlier items of the batch set, reads present. */
static void add_filter(const unsigned char *fps, Py_ssize_t n, int pbits, const Filter *f, unsigned char *new)
{
    uint64_t ring[WINDOW][MAX_HASHES];
    const int k = f->hashes;
    unsigned char *u8 = f->u8;
    for (Py_ssize_t i = 0; i < n + WINDOW; i++) {
        Py_ssize_t j = i - WINDOW;  /* first the item leaving the window: its slot is i's */
        if (j >= 0) {
            const uint64_t *pos = ring[j % WINDOW];
            unsigned char fresh = 0;
            for (int h = 0; h < k; h++) {
                unsigned char bit = (unsigned char)(1u << (pos[h] & 7));
                unsigned char *byte = u8 + (pos[h] >> 3), old = *byte;
                *byte = old | bit;  /* branch-free: at half fill a test of the bit is a coin flip */
                fresh |= !(old & bit);
            }
            new[j] = fresh;
        }
        if (i < n) {
            uint64_t *pos = ring[i % WINDOW];
            positions_of(key_of(fps + i * FP, pbits, f->part_size), f->part_size, k, pos);
            for (int h = 0; h < k; h++)
                __builtin_prefetch(cell_address(f, pos[h]), 1);
        }
    }
}

/* -- blocked filters (the blacklist's layout 2; frontier/blocked.py documents the math) ----------------- */

#define BLOCK_BYTES 64      /* one cache line: 512 bits */
#define BLOCK_WORDS 8
#ifndef BLOCK_WINDOW
#define BLOCK_WINDOW 16     /* items ahead whose block is prefetched: one line each, so more of them in flight */
#endif
#define BLOCK_GOLDEN 0x9E3779B97F4A7C15ULL

typedef struct {
    Py_buffer view;
    unsigned char *u8;
    uint64_t blocks;        /* < 2^32 */
    int hashes;
} Blocked;

/* splitmix64's finaliser */
static inline uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

/* blocked.block_positions: the block (high half of a * blocks) and the item's bits in it as 8 word masks */
static inline uint64_t block_of(const unsigned char *fp, const Blocked *f, uint64_t *mask)
{
    uint64_t a = load_be64(fp), b = load_be64(fp + 8);
    memset(mask, 0, BLOCK_BYTES);
    for (int i = 0, w = 0; i < f->hashes; w++) {
        uint64_t r = mix64(b + (uint64_t)w * BLOCK_GOLDEN);
        for (int c = 0; c < 7 && i < f->hashes; c++, i++, r >>= 9)
            mask[(r & 511) >> 6] |= 1ULL << (r & 63);
    }
    return (uint64_t)(((unsigned __int128)a * f->blocks) >> 64);
}

/* found[i] = every bit of item i is set */
static void block_test_filter(const unsigned char *fps, Py_ssize_t n, const Blocked *f, unsigned char *found)
{
    uint64_t masks[BLOCK_WINDOW][BLOCK_WORDS], at[BLOCK_WINDOW];
    for (Py_ssize_t i = 0; i < n + BLOCK_WINDOW; i++) {
        Py_ssize_t j = i - BLOCK_WINDOW;  /* first the item leaving the window: its slot is i's */
        if (j >= 0) {
            const uint64_t *mask = masks[j % BLOCK_WINDOW];
            const unsigned char *block = f->u8 + at[j % BLOCK_WINDOW] * BLOCK_BYTES;
            uint64_t missing = 0;
            for (int w = 0; w < BLOCK_WORDS; w++) {
                uint64_t word;
                memcpy(&word, block + 8 * w, 8);
                missing |= mask[w] & ~word;
            }
            found[j] = !missing;
        }
        if (i < n) {
            uint64_t block = block_of(fps + i * FP, f, masks[i % BLOCK_WINDOW]);
            at[i % BLOCK_WINDOW] = block;
            __builtin_prefetch(f->u8 + block * BLOCK_BYTES, 0);
        }
    }
}

/* Set an item's bits in its block; 1 if one of them was unset. */
static inline unsigned char block_set(unsigned char *block, const uint64_t *mask)
{
    uint64_t missing = 0;
    for (int w = 0; w < BLOCK_WORDS; w++) {
        uint64_t word;
        memcpy(&word, block + 8 * w, 8);
        missing |= mask[w] & ~word;
        word |= mask[w];
        memcpy(block + 8 * w, &word, 8);
    }
    return missing != 0;
}

/* Check-and-add in one pass, item by item, as add_filter: new[i] = some bit of item i was unset (then set). */
static void block_add_filter(const unsigned char *fps, Py_ssize_t n, const Blocked *f, unsigned char *new)
{
    uint64_t masks[BLOCK_WINDOW][BLOCK_WORDS], at[BLOCK_WINDOW];
    for (Py_ssize_t i = 0; i < n + BLOCK_WINDOW; i++) {
        Py_ssize_t j = i - BLOCK_WINDOW;  /* first the item leaving the window: its slot is i's */
        if (j >= 0)
            new[j] = block_set(f->u8 + at[j % BLOCK_WINDOW] * BLOCK_BYTES, masks[j % BLOCK_WINDOW]);
        if (i < n) {
            uint64_t block = block_of(fps + i * FP, f, masks[i % BLOCK_WINDOW]);
            at[i % BLOCK_WINDOW] = block;
            __builtin_prefetch(f->u8 + block * BLOCK_BYTES, 1);
        }
    }
}

/* A blocked filter tuple (buffer, blocks, hashes). */
static int get_blocked(PyObject *spec, int writable, Blocked *f)
{
    PyObject *buf;
    unsigned long long blocks;
    if (!PyArg_ParseTuple(spec, "OKi;a blocked filter is (buffer, blocks, hashes)", &buf, &blocks, &f->hashes))
        return -1;
    if (blocks < 1 || blocks >= (1ULL << 32) || f->hashes < 1 || f->hashes > MAX_HASHES) {
        PyErr_Format(PyExc_ValueError, "1..2^32-1 blocks and 1..%d hashes expected, got %llu and %d", MAX_HASHES,
                     blocks, f->hashes);
        return -1;
    }
    f->blocks = blocks;
    if (PyObject_GetBuffer(buf, &f->view, writable ? PyBUF_WRITABLE : PyBUF_SIMPLE) < 0)
        return -1;
    if ((uint64_t)f->view.len < blocks * BLOCK_BYTES) {
        PyErr_Format(PyExc_ValueError, "filter buffer of %zd bytes is smaller than %llu blocks of %d bytes",
                     f->view.len, blocks, BLOCK_BYTES);
        PyBuffer_Release(&f->view);
        return -1;
    }
    f->u8 = f->view.buf;
    return 0;
}

/* block_test and block_add: one kernel over a batch, with the arguments parsed and the GIL released */
static PyObject *run_blocked(PyObject *args, const char *format, int writable,
                             void (*kernel)(const unsigned char *, Py_ssize_t, const Blocked *, unsigned char *))
{
    PyObject *fps_obj, *spec;
    Py_buffer fps;
    Py_ssize_t n;
    Blocked f;
    if (!PyArg_ParseTuple(args, format, &fps_obj, &PyTuple_Type, &spec) || get_fps(fps_obj, &fps, &n) < 0)
        return NULL;
    if (get_blocked(spec, writable, &f) < 0) {
        PyBuffer_Release(&fps);
        return NULL;
    }
    PyObject *out = PyByteArray_FromStringAndSize(NULL, n);
    if (out != NULL) {
        PyThreadState *state = release_gil(n);
        kernel(fps.buf, n, &f, (unsigned char *)PyByteArray_AS_STRING(out));
        restore_gil(state);
    }
    PyBuffer_Release(&f.view);
    PyBuffer_Release(&fps);
    return out;
}

PyDoc_STRVAR(block_test_doc,
"block_test(fps, filter) -> bytearray\n\n"
"Entry i is 1 if every bit of fingerprint i is set in the blocked filter (buffer, blocks, hashes).");

static PyObject *py_block_test(PyObject *self, PyObject *args)
{
    return run_blocked(args, "OO!:block_test", 0, block_test_filter);
}

PyDoc_STRVAR(block_add_doc,
"block_add(fps, filter) -> bytearray\n\n"
"Check-and-add of a blocked filter in one pass: entry i is 1 if fingerprint i had an unset bit (now set), as\n"
"if added one at a time: a repeat in the batch reads present. The caller holds the write lock.");

static PyObject *py_block_add(PyObject *self, PyObject *args)
{
    return run_blocked(args, "OO!:block_add", 1, block_add_filter);
}

/* -- module functions ------------------------------------------------------------------------------- */

PyDoc_STRVAR(test_doc,
"test(fps, pbits, filters) -> bytearray\n\n"
"Entry i is 1 if some filter has every cell of fingerprint i nonzero (\"maybe present\"), else 0.");

static PyObject *py_test(PyObject *self, PyObject *args)
{
    PyObject *fps_obj, *filters;
    int pbits;
    Py_buffer fps;
    Py_ssize_t n;
    if (!PyArg_ParseTuple(args, "OiO!:test", &fps_obj, &pbits, &PyList_Type, &filters) || check_pbits(pbits) < 0)
        return NULL;
    if (get_fps(fps_obj, &fps, &n) < 0)
        return NULL;
    Py_ssize_t nf = PyList_GET_SIZE(filters);
    Filter *fs = PyMem_Calloc(nf ? nf : 1, sizeof(Filter));
    PyObject *out = fs ? PyByteArray_FromStringAndSize(NULL, n) : PyErr_NoMemory();
    Py_ssize_t got = 0;
    if (out == NULL)
        goto done;
    for (; got < nf; got++)
        if (get_filter(PyList_GET_ITEM(filters, got), pbits, 0, &fs[got]) < 0) {
            Py_CLEAR(out);
            goto done;
        }
    unsigned char *found = (unsigned char *)PyByteArray_AS_STRING(out);
    memset(found, 0, n);
    PyThreadState *state = release_gil(n);
    for (Py_ssize_t g = 0; g < nf; g++)
        test_filter(fps.buf, n, pbits, &fs[g], found);
    restore_gil(state);
done:
    for (Py_ssize_t g = 0; g < got; g++)
        PyBuffer_Release(&fs[g].view);
    PyMem_Free(fs);
    PyBuffer_Release(&fps);
    return out;
}

PyDoc_STRVAR(update_doc,
"update(fps, pbits, filter, select, value=1, step=1)\n\n"
"For each fingerprint i with select[i] == value: set its bits (a 1-bit filter; step must be 1), or add step\n"
"(+1 or -1) to its 4-bit counters, saturating (15 stays 15, 0 stays 0). The caller holds the locks.");

static PyObject *py_update(PyObject *self, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"fps", "pbits", "filter", "select", "value", "step", NULL};
    PyObject *fps_obj, *spec, *select_obj;
    int pbits, value = 1, step = 1;
    Py_buffer fps, select;
    Py_ssize_t n;
    Filter f;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OiO!O|ii:update", kwlist, &fps_obj, &pbits, &PyTuple_Type, &spec,
                                     &select_obj, &value, &step) || check_pbits(pbits) < 0)
        return NULL;
    if (step != 1 && step != -1) {
        PyErr_Format(PyExc_ValueError, "step must be 1 or -1, got %d", step);
        return NULL;
    }
    if (value < 0 || value > 255) {
        PyErr_Format(PyExc_ValueError, "value must be in [0, 255], got %d", value);
        return NULL;
    }
    if (get_fps(fps_obj, &fps, &n) < 0)
        return NULL;
    if (get_filter(spec, pbits, 1, &f) < 0) {
        PyBuffer_Release(&fps);
        return NULL;
    }
    PyObject *result = NULL;
    if (f.cell_bits == 1 && step != 1)
        PyErr_SetString(PyExc_ValueError, "a bit cannot be decremented");
    else if (get_array(select_obj, &select, n, 1, 0, "select") == 0) {
        PyThreadState *state = release_gil(n);
        update_filter(fps.buf, n, pbits, &f, select.buf, (unsigned char)value, step);
        restore_gil(state);
        PyBuffer_Release(&select);
        result = Py_NewRef(Py_None);
    }
    PyBuffer_Release(&f.view);
    PyBuffer_Release(&fps);
    return result;
}

PyDoc_STRVAR(add_doc,
"add(fps, pbits, filter) -> bytearray\n\n"
"Check-and-add of a 1-bit filter in one pass: entry i is 1 if fingerprint i had an unset bit (now set), as\n"
"if added one at a time: a repeat in the batch reads present. The caller holds the write lock.");

static PyObject *py_add(PyObject *self, PyObject *args)
{
    PyObject *fps_obj, *spec;
    int pbits;
    Py_buffer fps;
    Py_ssize_t n;
    Filter f;
    if (!PyArg_ParseTuple(args, "OiO!:add", &fps_obj, &pbits, &PyTuple_Type, &spec) || check_pbits(pbits) < 0 ||
        get_fps(fps_obj, &fps, &n) < 0)
        return NULL;
    if (get_filter(spec, pbits, 1, &f) < 0) {
        PyBuffer_Release(&fps);
        return NULL;
    }
    PyObject *out = NULL;
    if (f.cell_bits != 1)
        PyErr_SetString(PyExc_ValueError, "add: a filter of 1-bit cells expected");
    else if ((out = PyByteArray_FromStringAndSize(NULL, n)) != NULL) {
        PyThreadState *state = release_gil(n);
        add_filter(fps.buf, n, pbits, &f, (unsigned char *)PyByteArray_AS_STRING(out));
        restore_gil(state);
    }
    PyBuffer_Release(&f.view);
    PyBuffer_Release(&fps);
    return out;
}

PyDoc_STRVAR(firsts_doc,
"firsts(fps, mask) -> bytearray\n\n"
"Entry i is 1 if mask[i] is nonzero and no earlier j with mask[j] nonzero has the same fingerprint: the\n"
"first occurrence in the batch, as a set would report it.");

static PyObject *py_firsts(PyObject *self, PyObject *args)
{
    PyObject *fps_obj, *mask_obj;
    Py_buffer fps, mask;
    Py_ssize_t n;
    if (!PyArg_ParseTuple(args, "OO:firsts", &fps_obj, &mask_obj) || get_fps(fps_obj, &fps, &n) < 0)
        return NULL;
    if (get_array(mask_obj, &mask, n, 1, 0, "mask") < 0) {
        PyBuffer_Release(&fps);
        return NULL;
    }
    PyObject *out = PyByteArray_FromStringAndSize(NULL, n);
    Py_ssize_t slots = 16;
    while (slots < 2 * n)
        slots <<= 1;
    Py_ssize_t *table = out ? PyMem_Malloc(slots * sizeof(Py_ssize_t)) : NULL;
    if (out != NULL && table == NULL) {
        Py_CLEAR(out);
        PyErr_NoMemory();
    }
    if (out != NULL) {
        const unsigned char *f = fps.buf, *m = mask.buf;
        unsigned char *o = (unsigned char *)PyByteArray_AS_STRING(out);
        memset(table, 0xFF, slots * sizeof(Py_ssize_t));  /* -1: empty */
        for (Py_ssize_t i = 0; i < n; i++) {
            o[i] = 0;
            if (!m[i])
                continue;
            size_t s = (size_t)load_be64(f + i * FP + 8) & (size_t)(slots - 1);  /* xxh3 bits: uniform */
            for (;; s = (s + 1) & (size_t)(slots - 1)) {
                if (table[s] < 0) {
                    table[s] = i;
                    o[i] = 1;
                    break;
                }
                if (memcmp(f + table[s] * FP, f + i * FP, FP) == 0)
                    break;
            }
        }
    }
    PyMem_Free(table);
    PyBuffer_Release(&mask);
    PyBuffer_Release(&fps);
    return out;
}

PyDoc_STRVAR(partition_range_doc,
"partition_range(fps, pbits) -> (low, high)\n\nThe lowest and highest partition of a non-empty batch.");

static PyObject *py_partition_range(PyObject *self, PyObject *args)
{
    PyObject *fps_obj;
    int pbits;
    Py_buffer fps;
    Py_ssize_t n;
    if (!PyArg_ParseTuple(args, "Oi:partition_range", &fps_obj, &pbits) || check_pbits(pbits) < 0 ||
        get_fps(fps_obj, &fps, &n) < 0)
        return NULL;
    if (n == 0) {
        PyBuffer_Release(&fps);
        PyErr_SetString(PyExc_ValueError, "partition_range of an empty batch");
        return NULL;
    }
    int low = INT32_MAX, high = -1;
    for (Py_ssize_t i = 0; i < n; i++) {
        int p = partition_of((const unsigned char *)fps.buf + i * FP, pbits);
        low = p < low ? p : low;
        high = p > high ? p : high;
    }
    PyBuffer_Release(&fps);
    return Py_BuildValue("(ii)", low, high);
}

PyDoc_STRVAR(place_doc,
"place(fps, pbits, select, counts, current, caps) -> (bytearray, int)\n\n"
"SharedBloom's generation of each selected fingerprint (select[i] nonzero), as if added one at a time in\n"
"order: a partition p fills its current generation current[p] up to caps[g] items (counts[g][p] hold\n"
"already), then the next. Unselected items get 255. Returns the generations and the highest one (-1 if\n"
"none); counts (u64 [G][P]) and current (u8 [P]) are only read. ValueError past the last of caps.");

static PyObject *py_place(PyObject *self, PyObject *args)
{
    PyObject *fps_obj, *select_obj, *counts_obj, *current_obj, *caps_obj;
    int pbits;
    Py_buffer fps, select = {0}, counts = {0}, current = {0}, caps = {0};
    Py_ssize_t n;
    if (!PyArg_ParseTuple(args, "OiOOOO:place", &fps_obj, &pbits, &select_obj, &counts_obj, &current_obj,
                          &caps_obj) || check_pbits(pbits) < 0 || get_fps(fps_obj, &fps, &n) < 0)
        return NULL;
    PyObject *out = NULL;
    uint64_t *fill = NULL;
    unsigned char *gen_now = NULL;
    Py_ssize_t parts = (Py_ssize_t)1 << pbits;
    if (get_array(select_obj, &select, n, 1, 0, "select") < 0 || get_array(current_obj, &current, parts, 1, 0,
        "current") < 0 || PyObject_GetBuffer(caps_obj, &caps, PyBUF_SIMPLE) < 0)
        goto done;
    Py_ssize_t gens = caps.len / 8;
    if (caps.len % 8 || gens < 1 || gens > NO_GEN) {
        PyErr_SetString(PyExc_ValueError, "caps: 1..254 u64 expected");
        goto done;
    }
    if (get_array(counts_obj, &counts, gens * parts, 8, 0, "counts") < 0)
        goto done;
    out = PyByteArray_FromStringAndSize(NULL, n);
    fill = PyMem_Malloc(parts * sizeof(uint64_t));
    gen_now = PyMem_Malloc(parts);
    if (out == NULL || fill == NULL || gen_now == NULL) {
        Py_CLEAR(out);
        if (!PyErr_Occurred())
            PyErr_NoMemory();
        goto done;
    }
    const uint64_t *cnt = counts.buf, *cap = caps.buf;
    const unsigned char *sel = select.buf, *cur = current.buf;
    unsigned char *gen_of = (unsigned char *)PyByteArray_AS_STRING(out);
    memcpy(gen_now, cur, parts);
    for (Py_ssize_t p = 0; p < parts; p++) {
        if (gen_now[p] >= gens) {
            PyErr_Format(PyExc_ValueError, "current generation %d of partition %zd is past the caps", gen_now[p], p);
            Py_CLEAR(out);
            goto done;
        }
        fill[p] = cnt[gen_now[p] * parts + p];
    }
    int top = -1;
    for (Py_ssize_t i = 0; i < n; i++) {
        gen_of[i] = NO_GEN;
        if (!sel[i])
            continue;
        int p = partition_of((const unsigned char *)fps.buf + i * FP, pbits);
        while (fill[p] >= cap[gen_now[p]]) {
            if (gen_now[p] + 1 >= gens) {
                PyErr_SetString(PyExc_ValueError, "place: past the last generation of caps");
                Py_CLEAR(out);
                goto done;
            }
            gen_now[p]++;
            fill[p] = cnt[gen_now[p] * parts + p];
        }
        fill[p]++;
        gen_of[i] = gen_now[p];
        top = gen_now[p] > top ? gen_now[p] : top;
    }
    PyObject *result = Py_BuildValue("(Oi)", out, top);
    Py_SETREF(out, result);
done:
    PyMem_Free(fill);
    PyMem_Free(gen_now);
    if (caps.obj)
        PyBuffer_Release(&caps);
    if (counts.obj)
        PyBuffer_Release(&counts);
    if (current.obj)
        PyBuffer_Release(&current);
    if (select.obj)
        PyBuffer_Release(&select);
    PyBuffer_Release(&fps);
    return out;
}

PyDoc_STRVAR(tally_doc,
"tally(fps, pbits, select, value, counts, step, current=None)\n\n"
"counts[p] += step (an array of 2^pbits 64-bit integers) for each fingerprint with select[i] == value in\n"
"partition p; with `current` (u8 per partition), also current[p] = max(current[p], value).");

static PyObject *py_tally(PyObject *self, PyObject *args)
{
    PyObject *fps_obj, *select_obj, *counts_obj, *current_obj = Py_None;
    int pbits, value, step;
    Py_buffer fps, select = {0}, counts = {0}, current = {0};
    Py_ssize_t n;
    if (!PyArg_ParseTuple(args, "OiOiOi|O:tally", &fps_obj, &pbits, &select_obj, &value, &counts_obj, &step,
                          &current_obj) || check_pbits(pbits) < 0 || get_fps(fps_obj, &fps, &n) < 0)
        return NULL;
    PyObject *result = NULL;
    Py_ssize_t parts = (Py_ssize_t)1 << pbits;
    if (get_array(select_obj, &select, n, 1, 0, "select") < 0 ||
        get_array(counts_obj, &counts, parts, 8, 1, "counts") < 0 ||
        (current_obj != Py_None && get_array(current_obj, &current, parts, 1, 1, "current") < 0))
        goto done;
    const unsigned char *sel = select.buf;
    int64_t *cnt = counts.buf;  /* u64 or i64: two's complement adds alike */
    unsigned char *cur = current.obj ? current.buf : NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (sel[i] != value)
            continue;
        int p = partition_of((const unsigned char *)fps.buf + i * FP, pbits);
        cnt[p] += step;
        if (cur && cur[p] < value)
            cur[p] = (unsigned char)value;
    }
    result = Py_NewRef(Py_None);
done:
    if (current.obj)
        PyBuffer_Release(&current);
    if (counts.obj)
        PyBuffer_Release(&counts);
    if (select.obj)
        PyBuffer_Release(&select);
    PyBuffer_Release(&fps);
    return result;
}

/* -- hashing ---------------------------------------------------------------------------------------- */

/* XXH3-128 of a str's UTF-8 (surrogates passed through, as str.encode("utf-8", "surrogatepass")), big-endian. */
static int digest_of(PyObject *url, unsigned char *out)
{
    if (!PyUnicode_Check(url)) {
        PyErr_Format(PyExc_TypeError, "expected a URL string, got %.100s", Py_TYPE(url)->tp_name);
        return -1;
    }
    XXH128_hash_t h;
    if (PyUnicode_IS_ASCII(url)) {
        h = XXH3_128bits(PyUnicode_DATA(url), (size_t)PyUnicode_GET_LENGTH(url));
    } else {
        PyObject *utf8 = PyUnicode_AsEncodedString(url, "utf-8", "surrogatepass");
        if (utf8 == NULL)
            return -1;
        h = XXH3_128bits(PyBytes_AS_STRING(utf8), (size_t)PyBytes_GET_SIZE(utf8));
        Py_DECREF(utf8);
    }
    XXH128_canonicalFromHash((XXH128_canonical_t *)out, h);
    return 0;
}

PyDoc_STRVAR(fingerprints_doc,
"fingerprints(urls) -> list[bytes]\n\n"
"frontier.fingerprint.fingerprint of each URL string (xxh3_128 of its UTF-8, big-endian), in one C loop.");

static PyObject *py_fingerprints(PyObject *self, PyObject *urls)
{
    PyObject *seq = PySequence_Fast(urls, "expected a sequence of URL strings");
    if (seq == NULL)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    PyObject **items = PySequence_Fast_ITEMS(seq);
    PyObject *out = PyList_New(n);
    for (Py_ssize_t i = 0; out != NULL && i < n; i++) {
        unsigned char digest[FP];
        PyObject *fp = digest_of(items[i], digest) < 0 ? NULL : PyBytes_FromStringAndSize((char *)digest, FP);
        if (fp == NULL)
            Py_CLEAR(out);
        else
            PyList_SET_ITEM(out, i, fp);
    }
    Py_DECREF(seq);
    return out;
}

PyDoc_STRVAR(join_doc,
"join(items) -> bytes | None\n\n"
"b\"\".join(items) if items (a list or tuple) are all bytes of exactly 16 bytes: fingerprints; else None.");

static PyObject *py_join(PyObject *self, PyObject *items)
{
    if (!PyList_Check(items) && !PyTuple_Check(items))
        Py_RETURN_NONE;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(items);
    PyObject **item = PySequence_Fast_ITEMS(items);
    PyObject *out = PyBytes_FromStringAndSize(NULL, n * FP);
    if (out == NULL)
        return NULL;
    char *to = PyBytes_AS_STRING(out);
    for (Py_ssize_t i = 0; i < n; i++, to += FP) {
        if (!PyBytes_CheckExact(item[i]) || PyBytes_GET_SIZE(item[i]) != FP) {
            Py_DECREF(out);
            Py_RETURN_NONE;
        }
        memcpy(to, PyBytes_AS_STRING(item[i]), FP);
    }
    return out;
}

PyDoc_STRVAR(digests_doc,
"digests(urls) -> bytes\n\n"
"The fingerprints of the URL strings joined into one buffer: b\"\".join(fingerprints(urls)) without a bytes\n"
"object per URL.");

static PyObject *py_digests(PyObject *self, PyObject *urls)
{
    PyObject *seq = PySequence_Fast(urls, "expected a sequence of URL strings");
    if (seq == NULL)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    PyObject **items = PySequence_Fast_ITEMS(seq);
    PyObject *out = PyBytes_FromStringAndSize(NULL, n * FP);
    unsigned char *to = out ? (unsigned char *)PyBytes_AS_STRING(out) : NULL;
    for (Py_ssize_t i = 0; out != NULL && i < n; i++)
        if (digest_of(items[i], to + i * FP) < 0)
            Py_CLEAR(out);
    Py_DECREF(seq);
    return out;
}

PyDoc_STRVAR(select_doc,
"select(fps, mask) -> bytes\n\nThe fingerprints i with mask[i] nonzero, joined, in order.");

static PyObject *py_select(PyObject *self, PyObject *args)
{
    PyObject *fps_obj, *mask_obj;
    Py_buffer fps, mask;
    Py_ssize_t n, k = 0;
    if (!PyArg_ParseTuple(args, "OO:select", &fps_obj, &mask_obj) || get_fps(fps_obj, &fps, &n) < 0)
        return NULL;
    if (get_array(mask_obj, &mask, n, 1, 0, "mask") < 0) {
        PyBuffer_Release(&fps);
        return NULL;
    }
    const unsigned char *m = mask.buf, *f = fps.buf;
    for (Py_ssize_t i = 0; i < n; i++)
        k += m[i] != 0;
    PyObject *out = PyBytes_FromStringAndSize(NULL, k * FP);
    if (out != NULL) {
        char *to = PyBytes_AS_STRING(out);
        for (Py_ssize_t i = 0; i < n; i++)
            if (m[i]) {
                memcpy(to, f + i * FP, FP);
                to += FP;
            }
    }
    PyBuffer_Release(&mask);
    PyBuffer_Release(&fps);
    return out;
}

/* -- fingerprint sets ------------------------------------------------------------------------------- */

/* A set of fingerprints in a writable buffer of (1 + slots) x 16 bytes, slots a power of two: slot 0 is the
 * header (u64 entries, u64 1 if the all-zero fingerprint is in), then open addressing with linear probing
 * from the low bits of the second half (xxh3 bits: uniform); an all-zero slot is empty. The caller keeps the
 * load at most 1/2 (frontier.fpset grows the buffer). */
typedef struct {
    Py_buffer view;
    unsigned char *slot;    /* slot 1 of the buffer: slot s is slot + s * FP */
    uint64_t *header;
    size_t mask;            /* slots - 1 */
} Table;

static int get_table(PyObject *obj, int writable, Table *t)
{
    if (PyObject_GetBuffer(obj, &t->view, writable ? PyBUF_WRITABLE : PyBUF_SIMPLE) < 0)
        return -1;
    Py_ssize_t slots = t->view.len / FP - 1;
    if (t->view.len % FP || slots < 1 || (slots & (slots - 1))) {
        PyErr_Format(PyExc_ValueError, "a fingerprint set of (1 + 2^k) x %d bytes expected, got %zd bytes", FP,
                     t->view.len);
        PyBuffer_Release(&t->view);
        return -1;
    }
    t->header = t->view.buf;
    t->slot = (unsigned char *)t->view.buf + FP;
    t->mask = (size_t)slots - 1;
    return 0;
}

static inline size_t home_of(const Table *t, const unsigned char *fp)
{
    uint64_t v;
    memcpy(&v, fp + 8, 8);
    return (size_t)v & t->mask;
}

static inline int is_zero(const unsigned char *fp)
{
    uint64_t a, b;
    memcpy(&a, fp, 8);
    memcpy(&b, fp + 8, 8);
    return (a | b) == 0;
}

static inline int same(const unsigned char *x, const unsigned char *y)
{
    uint64_t a, b, c, d;
    memcpy(&a, x, 8);
    memcpy(&b, x + 8, 8);
    memcpy(&c, y, 8);
    memcpy(&d, y + 8, 8);
    return ((a ^ c) | (b ^ d)) == 0;
}

/* The slot holding fp, or the empty slot where it would go (fp is not all zeros). */
static inline size_t probe(const Table *t, const unsigned char *fp)
{
    size_t s = home_of(t, fp);
    while (!is_zero(t->slot + s * FP) && !same(t->slot + s * FP, fp))
        s = (s + 1) & t->mask;
    return s;
}

/* the home slot of the fingerprint WINDOW places ahead, for the loops over a batch */
static inline void prefetch_ahead(const Table *t, const unsigned char *fps, Py_ssize_t i, Py_ssize_t n, int write)
{
    if (i + WINDOW < n) {
        const void *at = t->slot + home_of(t, fps + (i + WINDOW) * FP) * FP;
        if (write)
            __builtin_prefetch(at, 1);
        else
            __builtin_prefetch(at, 0);
    }
}

static inline int table_has(const Table *t, const unsigned char *fp)
{
    if (is_zero(fp))
        return t->header[1] != 0;
    return !is_zero(t->slot + probe(t, fp) * FP);
}

/* 1 if fp was added, 0 if it was there */
static inline int table_add(Table *t, const unsigned char *fp)
{
    if (is_zero(fp)) {
        if (t->header[1])
            return 0;
        t->header[1] = 1;
    } else {
        unsigned char *at = t->slot + probe(t, fp) * FP;
        if (!is_zero(at))
            return 0;
        memcpy(at, fp, FP);
    }
    t->header[0]++;
    return 1;
}

/* 1 if fp was removed; backward-shift deletion keeps every probe sequence unbroken (no tombstones) */
static int table_remove(Table *t, const unsigned char *fp)
{
    if (is_zero(fp)) {
        if (!t->header[1])
            return 0;
        t->header[1] = 0;
        t->header[0]--;
        return 1;
    }
    size_t hole = probe(t, fp);
    if (is_zero(t->slot + hole * FP))
        return 0;
    for (size_t s = (hole + 1) & t->mask; !is_zero(t->slot + s * FP); s = (s + 1) & t->mask) {
        size_t home = home_of(t, t->slot + s * FP);
        /* the entry at s may move to the hole if its home is not in (hole, s], cyclically */
        if (((s - home) & t->mask) >= ((s - hole) & t->mask)) {
            memcpy(t->slot + hole * FP, t->slot + s * FP, FP);
            hole = s;
        }
    }
    memset(t->slot + hole * FP, 0, FP);
    t->header[0]--;
    return 1;
}

PyDoc_STRVAR(set_add_doc,
"set_add(table, fps) -> int\n\n"
"Add the fingerprints to a fingerprint set (frontier.fpset's buffer, kept at most half full by the caller,\n"
"with room for all of them); returns how many were not in it.");

static PyObject *py_set_add(PyObject *self, PyObject *args)
{
    PyObject *table_obj, *fps_obj;
    Py_buffer fps;
    Py_ssize_t n, added = 0;
    Table t;
    if (!PyArg_ParseTuple(args, "OO:set_add", &table_obj, &fps_obj) || get_fps(fps_obj, &fps, &n) < 0)
        return NULL;
    if (get_table(table_obj, 1, &t) < 0) {
        PyBuffer_Release(&fps);
        return NULL;
    }
    if ((uint64_t)n + t.header[0] > (t.mask + 1) / 2 + 1) {
        PyErr_SetString(PyExc_ValueError, "set_add: the fingerprint set has no room for the batch");
    } else {
        for (Py_ssize_t i = 0; i < n; i++) {
            prefetch_ahead(&t, fps.buf, i, n, 1);
            added += table_add(&t, (const unsigned char *)fps.buf + i * FP);
        }
    }
    PyBuffer_Release(&t.view);
    PyBuffer_Release(&fps);
    return PyErr_Occurred() ? NULL : PyLong_FromSsize_t(added);
}

PyDoc_STRVAR(set_has_doc,
"set_has(fps, tables, mask=None) -> bytearray\n\n"
"Entry i is 1 if fingerprint i is in one of the fingerprint sets (a list of buffers); with mask, only the\n"
"entries with mask[i] nonzero are looked up (the others are 0).");

static PyObject *py_set_has(PyObject *self, PyObject *args)
{
    PyObject *fps_obj, *tables, *mask_obj = Py_None;
    Py_buffer fps, mask = {0};
    Py_ssize_t n;
    if (!PyArg_ParseTuple(args, "OO!|O:set_has", &fps_obj, &PyList_Type, &tables, &mask_obj) ||
        get_fps(fps_obj, &fps, &n) < 0)
        return NULL;
    if (mask_obj != Py_None && get_array(mask_obj, &mask, n, 1, 0, "mask") < 0) {
        PyBuffer_Release(&fps);
        return NULL;
    }
    Py_ssize_t nt = PyList_GET_SIZE(tables), got = 0;
    Table *ts = PyMem_Calloc(nt ? nt : 1, sizeof(Table));
    PyObject *out = ts ? PyByteArray_FromStringAndSize(NULL, n) : PyErr_NoMemory();
    for (; out != NULL && got < nt; got++)
        if (get_table(PyList_GET_ITEM(tables, got), 0, &ts[got]) < 0)
            Py_CLEAR(out);
    if (out != NULL) {
        unsigned char *o = (unsigned char *)PyByteArray_AS_STRING(out);
        const unsigned char *m = mask.obj ? mask.buf : NULL;
        for (Py_ssize_t i = 0; i < n; i++) {
            o[i] = 0;
            if (m && !m[i])
                continue;
            for (Py_ssize_t g = 0; g < nt; g++)
                prefetch_ahead(&ts[g], fps.buf, i, n, 0);
            for (Py_ssize_t g = 0; g < nt && !o[i]; g++)
                o[i] = (unsigned char)table_has(&ts[g], (const unsigned char *)fps.buf + i * FP);
        }
    }
    for (Py_ssize_t g = 0; g < got; g++)
        PyBuffer_Release(&ts[g].view);
    PyMem_Free(ts);
    if (mask.obj)
        PyBuffer_Release(&mask);
    PyBuffer_Release(&fps);
    return out;
}

PyDoc_STRVAR(set_remove_doc,
"set_remove(table, fps) -> bytearray\n\nRemove the fingerprints from a fingerprint set; entry i is 1 if fingerprint i"
" was in it (a repeat in the batch: 0).");

static PyObject *py_set_remove(PyObject *self, PyObject *args)
{
    PyObject *table_obj, *fps_obj;
    Py_buffer fps;
    Py_ssize_t n;
    Table t;
    if (!PyArg_ParseTuple(args, "OO:set_remove", &table_obj, &fps_obj) || get_fps(fps_obj, &fps, &n) < 0)
        return NULL;
    if (get_table(table_obj, 1, &t) < 0) {
        PyBuffer_Release(&fps);
        return NULL;
    }
    PyObject *out = PyByteArray_FromStringAndSize(NULL, n);
    if (out != NULL) {
        unsigned char *o = (unsigned char *)PyByteArray_AS_STRING(out);
        for (Py_ssize_t i = 0; i < n; i++)
            o[i] = (unsigned char)table_remove(&t, (const unsigned char *)fps.buf + i * FP);
    }
    PyBuffer_Release(&t.view);
    PyBuffer_Release(&fps);
    return out;
}

PyDoc_STRVAR(set_items_doc,
"set_items(table) -> bytes\n\nThe fingerprints of a fingerprint set, joined, in slot order (no particular order).");

static PyObject *py_set_items(PyObject *self, PyObject *table_obj)
{
    Table t;
    if (get_table(table_obj, 0, &t) < 0)
        return NULL;
    PyObject *out = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)t.header[0] * FP);
    if (out != NULL) {
        char *to = PyBytes_AS_STRING(out);
        if (t.header[1]) {
            memset(to, 0, FP);
            to += FP;
        }
        for (size_t s = 0; s <= t.mask; s++)
            if (!is_zero(t.slot + s * FP)) {
                memcpy(to, t.slot + s * FP, FP);
                to += FP;
            }
    }
    PyBuffer_Release(&t.view);
    return out;
}

PyDoc_STRVAR(block_add_urls_doc,
"block_add_urls(urls, filter) -> bytearray\n\n"
"block_add(fingerprints(urls), filter) in one loop: each URL is hashed while the blocks of the URLs before it\n"
"are fetched, so the hashing hides the cache misses of a filter larger than the caches. Holds the GIL (it\n"
"reads the strings). The caller holds the write lock.");

static PyObject *py_block_add_urls(PyObject *self, PyObject *args)
{
    PyObject *urls, *spec;
    Blocked f;
    if (!PyArg_ParseTuple(args, "OO!:block_add_urls", &urls, &PyTuple_Type, &spec))
        return NULL;
    PyObject *seq = PySequence_Fast(urls, "expected a sequence of URL strings");
    if (seq == NULL)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    PyObject **items = PySequence_Fast_ITEMS(seq);
    for (Py_ssize_t i = 0; i < n; i++)  /* refused before any bit is set */
        if (!PyUnicode_Check(items[i])) {
            PyErr_Format(PyExc_TypeError, "expected a URL string, got %.100s", Py_TYPE(items[i])->tp_name);
            Py_DECREF(seq);
            return NULL;
        }
    if (get_blocked(spec, 1, &f) < 0) {
        Py_DECREF(seq);
        return NULL;
    }
    PyObject *out = PyByteArray_FromStringAndSize(NULL, n);
    if (out != NULL) {
        unsigned char *new = (unsigned char *)PyByteArray_AS_STRING(out);
        uint64_t masks[BLOCK_WINDOW][BLOCK_WORDS], at[BLOCK_WINDOW];
        for (Py_ssize_t i = 0; i < n + BLOCK_WINDOW; i++) {
            Py_ssize_t j = i - BLOCK_WINDOW;  /* first the item leaving the window: its slot is i's */
            if (j >= 0)
                new[j] = block_set(f.u8 + at[j % BLOCK_WINDOW] * BLOCK_BYTES, masks[j % BLOCK_WINDOW]);
            if (i < n) {
                unsigned char digest[FP];
                if (i + BLOCK_WINDOW < n) {  /* the string hashed a window later: its header and first bytes */
                    __builtin_prefetch(items[i + BLOCK_WINDOW], 0);
                    __builtin_prefetch((const char *)items[i + BLOCK_WINDOW] + 64, 0);
                }
                if (digest_of(items[i], digest) < 0) {  /* only MemoryError: the bits of the URLs before stay set */
                    Py_CLEAR(out);
                    break;
                }
                uint64_t block = block_of(digest, &f, masks[i % BLOCK_WINDOW]);
                at[i % BLOCK_WINDOW] = block;
                __builtin_prefetch(f.u8 + block * BLOCK_BYTES, 1);
            }
        }
    }
    PyBuffer_Release(&f.view);
    Py_DECREF(seq);
    return out;
}

static PyMethodDef methods[] = {
    {"join", py_join, METH_O, join_doc},
    {"test", py_test, METH_VARARGS, test_doc},
    {"update", (PyCFunction)(void (*)(void))py_update, METH_VARARGS | METH_KEYWORDS, update_doc},
    {"add", py_add, METH_VARARGS, add_doc},
    {"block_test", py_block_test, METH_VARARGS, block_test_doc},
    {"block_add", py_block_add, METH_VARARGS, block_add_doc},
    {"block_add_urls", py_block_add_urls, METH_VARARGS, block_add_urls_doc},
    {"firsts", py_firsts, METH_VARARGS, firsts_doc},
    {"partition_range", py_partition_range, METH_VARARGS, partition_range_doc},
    {"place", py_place, METH_VARARGS, place_doc},
    {"tally", py_tally, METH_VARARGS, tally_doc},
    {"fingerprints", py_fingerprints, METH_O, fingerprints_doc},
    {"digests", py_digests, METH_O, digests_doc},
    {"select", py_select, METH_VARARGS, select_doc},
    {"set_add", py_set_add, METH_VARARGS, set_add_doc},
    {"set_has", py_set_has, METH_VARARGS, set_has_doc},
    {"set_remove", py_set_remove, METH_VARARGS, set_remove_doc},
    {"set_items", py_set_items, METH_O, set_items_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "frontier._native",
    "The filters' batch loops and the batch hash in C (see frontier.positions.native).", -1, methods,
};

PyMODINIT_FUNC PyInit__native(void)
{
    return PyModule_Create(&module);
}
