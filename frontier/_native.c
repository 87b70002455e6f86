/* frontier._native: the per-item loops of the filters' batch operations, in C.
 *
 * Optional: setup.py builds it when a compiler is there, and frontier.seen.positions.native() falls back to the
 * numpy path without it (or with FRONTIER_NO_NATIVE=1). Both paths compute the same positions (the math is
 * frontier/seen/positions.py's, documented there), so a filter or snapshot written by one is read by the other.
 *
 * A batch of fingerprints is one contiguous buffer of n x 16 bytes (b"".join of the digests). A filter is a
 * tuple (buffer, cell_bits, cells_per_partition, hashes): cell_bits 1 is a bit array (SharedBloom generation,
 * Blacklist; bit j is bit j%8 of byte j//8), 4 an array of 4-bit counters (CountingBloom; counter j is the low
 * nibble of byte j//2 when j is even). Big filters are memory-bound: every loop computes the positions of the
 * item WINDOW places ahead and prefetches their cache lines, so the misses of several items overlap. A blocked
 * filter (the blacklist's layout 2, frontier/seen/blocked.py) is a tuple (buffer, blocks, hashes): an item's bits
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
    int blocked;            /* all of an item's bits in one 512-bit block of its partition (SharedBloom's generation 0) */
} Filter;

static inline uint64_t load_be64(const unsigned char *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return __builtin_bswap64(v);
}

/* Entry i of a caller's u64 array: memcpy, since a buffer handed in need not be 8-byte aligned */
static inline uint64_t u64_at(const void *base, size_t i)
{
    uint64_t v;
    memcpy(&v, (const unsigned char *)base + 8 * i, 8);
    return v;
}

static inline void u64_put(void *base, size_t i, uint64_t v)
{
    memcpy((unsigned char *)base + 8 * i, &v, 8);
}

/* A tuple of the items of a sequence, owned: borrowed items of a list would dangle if a callback run meanwhile
 * (an __index__, a finaliser run by the garbage collector) emptied it. */
static PyObject *items_of(PyObject *obj, const char *message)
{
    PyObject *seq = PySequence_Fast(obj, message);
    if (seq == NULL || PyTuple_CheckExact(seq))
        return seq;
    PyObject *items = PySequence_Tuple(seq);
    Py_DECREF(seq);
    return items;
}

#define BLOCK_GOLDEN 0x9E3779B97F4A7C15ULL

/* splitmix64's finaliser: the bits of a blocked filter's item inside its block (frontier/seen/blocked.py) */
static inline uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
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

/* The cells of an item in filter f: positions_of, or in a blocked filter (blocked.partition_positions) the block
 * (the high half of the partition-free first half times the partition's blocks) and k bits in it, drawn 9 at a
 * time from splitmix words of the second half, as in the blacklist's blocks. */
static inline void filter_positions(const Filter *f, Key k, uint64_t *out)
{
    if (!f->blocked) {
        positions_of(k, f->part_size, f->hashes, out);
        return;
    }
    uint64_t block = (uint64_t)(((unsigned __int128)(k.stride & ~1ULL) * (f->part_size >> 9)) >> 64);
    uint64_t base = k.base + block * 512;
    for (int i = 0, w = 0; i < f->hashes; w++) {
        uint64_t r = mix64(k.b + (uint64_t)w * BLOCK_GOLDEN);
        for (int c = 0; c < 7 && i < f->hashes; c++, i++, r >>= 9)
            out[i] = base + (r & 511);
    }
}

/* Cache lines to prefetch for an item's cells: its block's one, or one per cell */
static inline int lines_of(const Filter *f)
{
    return f->blocked ? 1 : f->hashes;
}

/* pbits <= 31 (check_pbits): a partition is a non-negative int */
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
    if (pbits < 0 || pbits > 31) {
        PyErr_Format(PyExc_ValueError, "partition bits must be in [0, 31], got %d", pbits);
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

/* A filter tuple (buffer, cell_bits, cells_per_partition, hashes[, blocked]) whose buffer holds 2^pbits
 * partitions; blocked (default 0) wants 1-bit cells and partitions of whole 512-bit blocks. */
static int get_filter(PyObject *spec, int pbits, int writable, Filter *f)
{
    PyObject *buf;
    unsigned long long part_size;
    f->blocked = 0;
    if (!PyTuple_Check(spec)) {
        PyErr_Format(PyExc_TypeError, "a filter is a tuple (buffer, cell_bits, cells_per_partition, hashes[, blocked]), "
                     "got %.100s", Py_TYPE(spec)->tp_name);
        return -1;
    }
    if (!PyArg_ParseTuple(spec, "OiKi|p;a filter is (buffer, cell_bits, cells_per_partition, hashes[, blocked])",
                          &buf, &f->cell_bits, &part_size, &f->hashes, &f->blocked))
        return -1;
    if (f->blocked && (f->cell_bits != 1 || part_size % 512)) {
        PyErr_Format(PyExc_ValueError, "a blocked filter has 1-bit cells and partitions of 512-bit blocks, got %d "
                     "and %llu", f->cell_bits, part_size);
        return -1;
    }
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
    uint64_t cells = ((uint64_t)1 << pbits) * part_size;  /* < 2^63 */
    uint64_t need = f->cell_bits == 1 ? cells / 8 + (cells % 8 != 0) : cells / 2 + (cells % 2);  /* no wrap */
    if ((uint64_t)f->view.len < need) {
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
            filter_positions(f, key_of(fps + i * FP, pbits, f->part_size), pos);
            for (int h = 0; h < lines_of(f); h++)
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
    unsigned char chosen[WINDOW];  /* select[i] read once: the buffer may alias another or change meanwhile */
    const int k = f->hashes;
    unsigned char *u8 = f->u8;
    for (Py_ssize_t i = 0; i < n + WINDOW; i++) {
        Py_ssize_t j = i - WINDOW;  /* first the item leaving the window: its slot is i's */
        if (j >= 0 && chosen[j % WINDOW]) {
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
        if (i < n && (chosen[i % WINDOW] = select[i] == value)) {
            uint64_t *pos = ring[i % WINDOW];
            filter_positions(f, key_of(fps + i * FP, pbits, f->part_size), pos);
            for (int h = 0; h < lines_of(f); h++)
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
            filter_positions(f, key_of(fps + i * FP, pbits, f->part_size), pos);
            for (int h = 0; h < lines_of(f); h++)
                __builtin_prefetch(cell_address(f, pos[h]), 1);
        }
    }
}

/* -- blocked filters (the blacklist's layout 2; frontier/seen/blocked.py documents the math) ----------------- */

#define BLOCK_BYTES 64      /* one cache line: 512 bits */
#define BLOCK_WORDS 8
#ifndef BLOCK_WINDOW
#define BLOCK_WINDOW 16     /* items ahead whose block is prefetched: one line each, so more of them in flight */
#endif

typedef struct {
    Py_buffer view;
    unsigned char *u8;
    uint64_t blocks;        /* < 2^32 */
    int hashes;
} Blocked;

/* splitmix64's finaliser */
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
    if ((filters = PyList_AsTuple(filters)) == NULL)  /* owned: parsing a spec may run Python code */
        return NULL;
    if (get_fps(fps_obj, &fps, &n) < 0) {
        Py_DECREF(filters);
        return NULL;
    }
    Py_ssize_t nf = PyTuple_GET_SIZE(filters);
    Filter *fs = PyMem_Calloc(nf ? nf : 1, sizeof(Filter));
    PyObject *out = fs ? PyByteArray_FromStringAndSize(NULL, n) : PyErr_NoMemory();
    Py_ssize_t got = 0;
    if (out == NULL)
        goto done;
    for (; got < nf; got++)
        if (get_filter(PyTuple_GET_ITEM(filters, got), pbits, 0, &fs[got]) < 0) {
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
    Py_DECREF(filters);
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

/* -- a batch's check-and-add in two calls (SharedBloom.admitting) ---------------------------------------------- */

/* The generation of each selected item (sel[i] nonzero), as place() documents; gen_of[i] = NO_GEN for the others.
 * Returns the highest generation (-1: none), or -2 with ValueError set past the last of caps. */
static int place_items(const unsigned char *fps, Py_ssize_t n, int pbits, const unsigned char *sel, const void *cnt,
                       const void *cap, Py_ssize_t gens, const unsigned char *cur, unsigned char *gen_of)
{
    Py_ssize_t parts = (Py_ssize_t)1 << pbits;
    uint64_t *fill = PyMem_Malloc(parts * sizeof(uint64_t));
    unsigned char *gen_now = PyMem_Malloc(parts);
    int top = -1;
    if (fill == NULL || gen_now == NULL) {
        PyErr_NoMemory();
        top = -2;
        goto done;
    }
    memcpy(gen_now, cur, parts);
    for (Py_ssize_t p = 0; p < parts; p++) {
        if (gen_now[p] >= gens) {
            PyErr_Format(PyExc_ValueError, "current generation %d of partition %zd is past the caps", gen_now[p], p);
            top = -2;
            goto done;
        }
        fill[p] = u64_at(cnt, gen_now[p] * parts + p);
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        gen_of[i] = NO_GEN;
        if (!sel[i])
            continue;
        int p = partition_of(fps + i * FP, pbits);
        while (fill[p] >= u64_at(cap, gen_now[p])) {
            if (gen_now[p] + 1 >= gens) {
                PyErr_SetString(PyExc_ValueError, "place: past the last generation of caps");
                top = -2;
                goto done;
            }
            gen_now[p]++;
            fill[p] = u64_at(cnt, gen_now[p] * parts + p);
        }
        fill[p]++;
        gen_of[i] = gen_now[p];
        top = gen_now[p] > top ? gen_now[p] : top;
    }
done:
    PyMem_Free(fill);
    PyMem_Free(gen_now);
    return top;
}

/* The filters of a list (test: read only; insert: writable), each for 2^pbits partitions; NULL on error. */
static Filter *get_filters(PyObject *list, int pbits, int writable, Py_ssize_t *count)
{
    PyObject *filters = PyList_AsTuple(list);  /* owned: parsing a spec may run Python code */
    if (filters == NULL)
        return NULL;
    Py_ssize_t nf = PyTuple_GET_SIZE(filters), got = 0;
    Filter *fs = PyMem_Calloc(nf ? nf : 1, sizeof(Filter));
    if (fs == NULL)
        PyErr_NoMemory();
    for (; fs != NULL && got < nf; got++)
        if (get_filter(PyTuple_GET_ITEM(filters, got), pbits, writable, &fs[got]) < 0) {
            for (Py_ssize_t g = 0; g < got; g++)
                PyBuffer_Release(&fs[g].view);
            PyMem_Free(fs);
            fs = NULL;
        }
    Py_DECREF(filters);
    *count = nf;
    return fs;
}

static void release_filters(Filter *fs, Py_ssize_t nf)
{
    for (Py_ssize_t g = 0; g < nf; g++)
        PyBuffer_Release(&fs[g].view);
    PyMem_Free(fs);
}

/* state[i] = 2 for a repeat of an earlier fingerprint of the batch, 0 for a first occurrence; returns how many
 * are first occurrences, or -1 (MemoryError). */
static Py_ssize_t mark_repeats(const unsigned char *f, Py_ssize_t n, unsigned char *state)
{
    Py_ssize_t slots = 16, distinct = 0;
    while (slots < 2 * n)
        slots <<= 1;
    Py_ssize_t *table = PyMem_Malloc(slots * sizeof(Py_ssize_t));
    if (table == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    memset(table, 0xFF, slots * sizeof(Py_ssize_t));  /* -1: empty */
    for (Py_ssize_t i = 0; i < n; i++) {
        size_t s = (size_t)load_be64(f + i * FP + 8) & (size_t)(slots - 1);  /* xxh3 bits: uniform */
        for (;; s = (s + 1) & (size_t)(slots - 1)) {
            if (table[s] < 0) {
                table[s] = i;
                state[i] = 0;
                distinct++;
                break;
            }
            if (memcmp(f + table[s] * FP, f + i * FP, FP) == 0) {
                state[i] = 2;
                break;
            }
        }
    }
    PyMem_Free(table);
    return distinct;
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
    Py_ssize_t parts = (Py_ssize_t)1 << pbits;
    if (get_array(select_obj, &select, n, 1, 0, "select") < 0 || get_array(current_obj, &current, parts, 1, 0,
        "current") < 0 || PyObject_GetBuffer(caps_obj, &caps, PyBUF_SIMPLE) < 0)
        goto done;
    Py_ssize_t gens = caps.len / 8;
    if (caps.len % 8 || gens < 1 || gens > NO_GEN) {
        PyErr_SetString(PyExc_ValueError, "caps: 1..255 u64 expected");
        goto done;
    }
    if (get_array(counts_obj, &counts, gens * parts, 8, 0, "counts") < 0 ||
        (out = PyByteArray_FromStringAndSize(NULL, n)) == NULL)
        goto done;
    int top = place_items(fps.buf, n, pbits, select.buf, counts.buf, caps.buf, gens, current.buf,
                          (unsigned char *)PyByteArray_AS_STRING(out));
    Py_SETREF(out, top < -1 ? NULL : Py_BuildValue("(Oi)", out, top));
done:
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
    void *cnt = counts.buf;  /* u64 or i64: two's complement adds alike, done unsigned (no overflow) */
    unsigned char *cur = current.obj ? current.buf : NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (sel[i] != value)
            continue;
        int p = partition_of((const unsigned char *)fps.buf + i * FP, pbits);
        u64_put(cnt, p, u64_at(cnt, p) + (uint64_t)(int64_t)step);
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

PyDoc_STRVAR(admit_doc,
"admit(fps, pbits, filters, counts, current, caps) -> (mask, new, gen_of, top, flags, distinct)\n\n"
"Phase one of a batch's check-and-add, in one call (SharedBloom.admitting; the caller holds the locks): each\n"
"fingerprint's first occurrence in the batch is tested against every filter of the list (the generations), and\n"
"each one no filter holds is placed in its generation as place() does (counts u64 [G][P], current u8 [P] and\n"
"caps u64 [G] are only read). Returns mask (a bytearray, 1: new), the new fingerprints joined in batch order,\n"
"their generations (a bytearray, one a new fingerprint), the highest (-1: none), the mask as a list of bools,\n"
"and how many distinct fingerprints the batch holds. Nothing is written: insert() does that.");

static PyObject *py_admit(PyObject *self, PyObject *args)
{
    PyObject *fps_obj, *filters, *counts_obj, *current_obj, *caps_obj;
    int pbits;
    Py_buffer fps, counts = {0}, current = {0}, caps = {0};
    Py_ssize_t n, nf = 0;
    if (!PyArg_ParseTuple(args, "OiO!OOO:admit", &fps_obj, &pbits, &PyList_Type, &filters, &counts_obj,
                          &current_obj, &caps_obj) || check_pbits(pbits) < 0 || get_fps(fps_obj, &fps, &n) < 0)
        return NULL;
    PyObject *mask = NULL, *gen_of = NULL, *new = NULL, *flags = NULL, *result = NULL;
    Py_ssize_t parts = (Py_ssize_t)1 << pbits;
    Filter *fs = get_filters(filters, pbits, 0, &nf);
    if (fs == NULL || get_array(current_obj, &current, parts, 1, 0, "current") < 0 ||
        PyObject_GetBuffer(caps_obj, &caps, PyBUF_SIMPLE) < 0)
        goto done;
    Py_ssize_t gens = caps.len / 8;
    if (caps.len % 8 || gens < 1 || gens > NO_GEN) {
        PyErr_SetString(PyExc_ValueError, "caps: 1..255 u64 expected");
        goto done;
    }
    if (get_array(counts_obj, &counts, gens * parts, 8, 0, "counts") < 0)
        goto done;
    if ((mask = PyByteArray_FromStringAndSize(NULL, n)) == NULL || (gen_of = PyByteArray_FromStringAndSize(NULL, n)) == NULL)
        goto done;
    const unsigned char *f = fps.buf;
    unsigned char *m = (unsigned char *)PyByteArray_AS_STRING(mask), *g = (unsigned char *)PyByteArray_AS_STRING(gen_of);
    Py_ssize_t distinct = mark_repeats(f, n, m);
    if (distinct < 0)
        goto done;
    PyThreadState *state = release_gil(n);
    for (Py_ssize_t k = 0; k < nf; k++)
        test_filter(f, n, pbits, &fs[k], m);  /* skips the repeats (2) and what an earlier generation holds */
    restore_gil(state);
    Py_ssize_t fresh = 0;
    for (Py_ssize_t i = 0; i < n; i++)
        fresh += m[i] = m[i] == 0;
    int top = place_items(f, n, pbits, m, counts.buf, caps.buf, gens, current.buf, g);
    if (top < -1 || (new = PyBytes_FromStringAndSize(NULL, fresh * FP)) == NULL || (flags = PyList_New(n)) == NULL)
        goto done;
    unsigned char *to = (unsigned char *)PyBytes_AS_STRING(new);
    for (Py_ssize_t i = 0, j = 0; i < n; i++) {
        PyList_SET_ITEM(flags, i, Py_NewRef(m[i] ? Py_True : Py_False));
        if (m[i]) {
            memcpy(to + j * FP, f + i * FP, FP);
            g[j++] = g[i];  /* j <= i: the new ones' generations, compacted in place */
        }
    }
    if (PyByteArray_Resize(gen_of, fresh) < 0)
        goto done;
    result = Py_BuildValue("(OOOiOn)", mask, new, gen_of, top, flags, distinct);
done:
    Py_XDECREF(mask);
    Py_XDECREF(gen_of);
    Py_XDECREF(new);
    Py_XDECREF(flags);
    if (caps.obj)
        PyBuffer_Release(&caps);
    if (counts.obj)
        PyBuffer_Release(&counts);
    if (current.obj)
        PyBuffer_Release(&current);
    if (fs != NULL)
        release_filters(fs, nf);
    PyBuffer_Release(&fps);
    return result;
}

PyDoc_STRVAR(insert_doc,
"insert(fps, pbits, filters, gen_of, counts, current)\n\n"
"Phase two (the caller still holds the locks): fingerprint i's bits are set in filters[gen_of[i]], counts[g][p]\n"
"(u64 [G][P], G = len(filters)) gains 1 and current[p] (u8 [P]) becomes at least g, for g = gen_of[i] and p its\n"
"partition: what admit() placed, written.");

static PyObject *py_insert(PyObject *self, PyObject *args)
{
    PyObject *fps_obj, *filters, *gen_obj, *counts_obj, *current_obj;
    int pbits;
    Py_buffer fps, gen = {0}, counts = {0}, current = {0};
    Py_ssize_t n, nf = 0;
    if (!PyArg_ParseTuple(args, "OiO!OOO:insert", &fps_obj, &pbits, &PyList_Type, &filters, &gen_obj, &counts_obj,
                          &current_obj) || check_pbits(pbits) < 0 || get_fps(fps_obj, &fps, &n) < 0)
        return NULL;
    PyObject *result = NULL;
    Py_ssize_t parts = (Py_ssize_t)1 << pbits;
    Filter *fs = get_filters(filters, pbits, 1, &nf);
    if (fs == NULL || get_array(gen_obj, &gen, n, 1, 0, "gen_of") < 0 ||
        get_array(counts_obj, &counts, nf * parts, 8, 1, "counts") < 0 ||
        get_array(current_obj, &current, parts, 1, 1, "current") < 0)
        goto done;
    const unsigned char *f = fps.buf;
    unsigned char *g = PyMem_Malloc(n ? n : 1), *cur = current.buf;
    if (g == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    memcpy(g, gen.buf, n);  /* read once: the buffer may change meanwhile */
    for (Py_ssize_t i = 0; i < n; i++)
        if (g[i] >= nf) {
            PyErr_Format(PyExc_ValueError, "gen_of[%zd] = %d: there are %zd filters", i, g[i], nf);
            PyMem_Free(g);
            goto done;
        }
    PyThreadState *state = release_gil(n);
    for (Py_ssize_t k = 0; k < nf; k++)
        update_filter(f, n, pbits, &fs[k], g, (unsigned char)k, 1);
    restore_gil(state);
    for (Py_ssize_t i = 0; i < n; i++) {
        int p = partition_of(f + i * FP, pbits);
        u64_put(counts.buf, g[i] * parts + p, u64_at(counts.buf, g[i] * parts + p) + 1);
        if (cur[p] < g[i])
            cur[p] = g[i];
    }
    PyMem_Free(g);
    result = Py_NewRef(Py_None);
done:
    if (current.obj)
        PyBuffer_Release(&current);
    if (counts.obj)
        PyBuffer_Release(&counts);
    if (gen.obj)
        PyBuffer_Release(&gen);
    if (fs != NULL)
        release_filters(fs, nf);
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
"frontier.seen.fingerprint.fingerprint of each URL string (xxh3_128 of its UTF-8, big-endian), in one C loop.");

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
 * load at most 1/2 (frontier.seen.fpset grows the buffer); a probe still stops after every slot, so a buffer whose
 * header lies (a caller's bug) costs a wrong answer or an error, never an endless loop. */
typedef struct {
    Py_buffer view;
    unsigned char *slot;    /* slot 1 of the buffer: slot s is slot + s * FP */
    void *header;           /* u64 [2], read and written with memcpy: the buffer need not be aligned */
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

#define NO_SLOT SIZE_MAX

/* The slot holding fp, or the empty slot where it would go (fp is not all zeros); NO_SLOT if the table is full
 * without it. */
static inline size_t probe(const Table *t, const unsigned char *fp)
{
    size_t s = home_of(t, fp);
    for (size_t step = 0; step <= t->mask; step++, s = (s + 1) & t->mask)
        if (is_zero(t->slot + s * FP) || same(t->slot + s * FP, fp))
            return s;
    return NO_SLOT;
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
        return u64_at(t->header, 1) != 0;
    size_t s = probe(t, fp);
    return s != NO_SLOT && !is_zero(t->slot + s * FP);
}

/* 1 if fp was added, 0 if it was there, -1 if the table is full (its header count was wrong) */
static inline int table_add(Table *t, const unsigned char *fp)
{
    if (is_zero(fp)) {
        if (u64_at(t->header, 1))
            return 0;
        u64_put(t->header, 1, 1);
    } else {
        size_t s = probe(t, fp);
        if (s == NO_SLOT)
            return -1;
        unsigned char *at = t->slot + s * FP;
        if (!is_zero(at))
            return 0;
        memcpy(at, fp, FP);
    }
    u64_put(t->header, 0, u64_at(t->header, 0) + 1);
    return 1;
}

/* 1 if fp was removed; backward-shift deletion keeps every probe sequence unbroken (no tombstones) */
static int table_remove(Table *t, const unsigned char *fp)
{
    if (is_zero(fp)) {
        if (!u64_at(t->header, 1))
            return 0;
        u64_put(t->header, 1, 0);
        u64_put(t->header, 0, u64_at(t->header, 0) - 1);
        return 1;
    }
    size_t hole = probe(t, fp);
    if (hole == NO_SLOT || is_zero(t->slot + hole * FP))
        return 0;
    size_t s = (hole + 1) & t->mask;
    for (size_t step = 1; step <= t->mask && !is_zero(t->slot + s * FP); step++, s = (s + 1) & t->mask) {
        size_t home = home_of(t, t->slot + s * FP);
        /* the entry at s may move to the hole if its home is not in (hole, s], cyclically */
        if (((s - home) & t->mask) >= ((s - hole) & t->mask)) {
            memcpy(t->slot + hole * FP, t->slot + s * FP, FP);
            hole = s;
        }
    }
    memset(t->slot + hole * FP, 0, FP);
    u64_put(t->header, 0, u64_at(t->header, 0) - 1);
    return 1;
}

PyDoc_STRVAR(set_add_doc,
"set_add(table, fps) -> int\n\n"
"Add the fingerprints to a fingerprint set (frontier.seen.fpset's buffer, kept at most half full by the caller,\n"
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
    uint64_t count = u64_at(t.header, 0);
    if (count > (t.mask + 1) / 2 || (uint64_t)n > (t.mask + 1) / 2 - count) {  /* at most half full after */
        PyErr_SetString(PyExc_ValueError, "set_add: the fingerprint set has no room for the batch");
    } else {
        for (Py_ssize_t i = 0; i < n; i++) {
            prefetch_ahead(&t, fps.buf, i, n, 1);
            int got = table_add(&t, (const unsigned char *)fps.buf + i * FP);
            if (got < 0) {
                PyErr_SetString(PyExc_ValueError, "set_add: the fingerprint set is full (its header count is wrong)");
                break;
            }
            added += got;
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
    if ((tables = PyList_AsTuple(tables)) == NULL) {  /* owned: getting a buffer may run Python code */
        if (mask.obj)
            PyBuffer_Release(&mask);
        PyBuffer_Release(&fps);
        return NULL;
    }
    Py_ssize_t nt = PyTuple_GET_SIZE(tables), got = 0;
    Table *ts = PyMem_Calloc(nt ? nt : 1, sizeof(Table));
    PyObject *out = ts ? PyByteArray_FromStringAndSize(NULL, n) : PyErr_NoMemory();
    for (; out != NULL && got < nt; got++)
        if (get_table(PyTuple_GET_ITEM(tables, got), 0, &ts[got]) < 0)
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
    Py_DECREF(tables);
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
    Py_ssize_t count = u64_at(t.header, 1) != 0;  /* the entries as found, not as the header says */
    for (size_t s = 0; s <= t.mask; s++)
        count += !is_zero(t.slot + s * FP);
    PyObject *out = NULL;
    if ((uint64_t)count != u64_at(t.header, 0)) {
        PyErr_Format(PyExc_ValueError, "set_items: the header counts %llu entries, the table holds %zd",
                     (unsigned long long)u64_at(t.header, 0), count);
    } else if ((out = PyBytes_FromStringAndSize(NULL, count * FP)) != NULL) {
        char *to = PyBytes_AS_STRING(out), *end = to + count * FP;
        if (u64_at(t.header, 1)) {
            memset(to, 0, FP);
            to += FP;
        }
        for (size_t s = 0; s <= t.mask && to < end; s++)
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
    PyObject *seq = items_of(urls, "expected a sequence of URL strings");  /* parsing spec may run Python code */
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

#ifndef STREAM_DENSITY
#define STREAM_DENSITY 16   /* block_add_buckets streams the next slice when it has 1 item per 16 blocks or more */
#endif

/* A bulk load's buckets: slice r, the 2^shift blocks from first + r * 2^shift, owns the entries [start[r],
 * start[r+1]) of the buffer (16 bytes each), the first fill[r] of them used. start and fill are copies of the
 * caller's arrays, checked once: the loops run without the GIL, and another thread may write the arrays. */
typedef struct {
    Py_buffer buffer, fills;
    uint64_t *start, *fill;
    uint64_t slices, first;
    int shift;
} Buckets;

static void release_buckets(Buckets *b)
{
    if (b->buffer.obj)
        PyBuffer_Release(&b->buffer);
    if (b->fills.obj)
        PyBuffer_Release(&b->fills);
    PyMem_Free(b->start);
    PyMem_Free(b->fill);
}

/* The buckets (shift, first, buffer, starts, fills) of a filter of `blocks` blocks */
static int get_buckets(PyObject *spec, uint64_t blocks, int writable, Buckets *b)
{
    PyObject *buffer, *starts_obj, *fills;
    unsigned long long first;
    Py_buffer starts = {0};
    memset(b, 0, sizeof(*b));
    if (!PyArg_ParseTuple(spec, "iKOOO;buckets are (shift, first, buffer, starts, fills)", &b->shift, &first, &buffer,
                          &starts_obj, &fills))
        return -1;
    if (b->shift < 0 || b->shift > 32 || blocks < 1 || blocks >= (1ULL << 32) || first >= blocks) {
        PyErr_Format(PyExc_ValueError, "slice_shift 0..32, 1..2^32-1 blocks and a first block below them expected, "
                     "got %d, %llu and %llu", b->shift, (unsigned long long)blocks, first);
        return -1;
    }
    b->first = first;
    Py_ssize_t slices = PyObject_Length(fills);
    if (slices < 1) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "buckets: no slices");
        return -1;
    }
    b->slices = (uint64_t)slices;
    if (PyObject_GetBuffer(buffer, &b->buffer, writable ? PyBUF_WRITABLE : PyBUF_SIMPLE) < 0 ||
        get_array(starts_obj, &starts, slices + 1, 8, 0, "starts") < 0 ||
        get_array(fills, &b->fills, slices, 8, writable, "fills") < 0) {
        if (starts.obj)
            PyBuffer_Release(&starts);
        release_buckets(b);
        return -1;
    }
    b->start = PyMem_Malloc((size_t)(slices + 1) * 8);
    b->fill = PyMem_Malloc((size_t)slices * 8);
    if (b->start == NULL || b->fill == NULL) {
        PyErr_NoMemory();
    } else {
        memcpy(b->start, starts.buf, (size_t)(slices + 1) * 8);
        memcpy(b->fill, b->fills.buf, (size_t)slices * 8);
        const uint64_t *start = b->start, *fill = b->fill;
        for (uint64_t r = 0; r < b->slices && !PyErr_Occurred(); r++)
            if (start[r] > start[r + 1] || fill[r] > start[r + 1] - start[r])
                PyErr_SetString(PyExc_ValueError, "buckets: starts must ascend and fills fit their buckets");
        if (!PyErr_Occurred() && start[b->slices] > (uint64_t)b->buffer.len / FP)  /* not start * FP: it may wrap */
            PyErr_Format(PyExc_ValueError, "buckets: a buffer of %zd bytes for %llu entries", b->buffer.len,
                         (unsigned long long)start[b->slices]);
    }
    PyBuffer_Release(&starts);
    if (PyErr_Occurred()) {
        release_buckets(b);
        return -1;
    }
    return 0;
}

PyDoc_STRVAR(block_bucket_doc,
"block_bucket(fps, blocks, buckets) -> int\n\n"
"Copy fingerprints, in order, into the bucket of their slice (of a filter of `blocks` blocks). buckets is\n"
"(shift, first, buffer, starts, fills): slice r is the 2^shift blocks from first + r * 2^shift, its bucket the\n"
"entries [starts[r], starts[r+1]) of buffer, fills[r] of them used (uint64 arrays; fills is updated). Stops\n"
"before the first fingerprint whose bucket is full; returns how many were copied. ValueError for a fingerprint\n"
"outside the slices.");

static PyObject *py_block_bucket(PyObject *self, PyObject *args)
{
    PyObject *fps_obj, *spec;
    unsigned long long blocks;
    Py_buffer fps;
    Py_ssize_t n, i;
    Buckets b;
    if (!PyArg_ParseTuple(args, "OKO!:block_bucket", &fps_obj, &blocks, &PyTuple_Type, &spec) ||
        get_fps(fps_obj, &fps, &n) < 0)
        return NULL;
    if (get_buckets(spec, blocks, 1, &b) < 0) {
        PyBuffer_Release(&fps);
        return NULL;
    }
    const unsigned char *in = fps.buf;
    unsigned char *out = b.buffer.buf;
    const uint64_t *start = b.start;
    uint64_t *fill = b.fill;
    int outside = 0;
    PyThreadState *state = release_gil(n);
    for (i = 0; i < n; i++) {
        uint64_t block = (uint64_t)(((unsigned __int128)load_be64(in + i * FP) * blocks) >> 64);
        uint64_t r = (block - b.first) >> b.shift;  /* wraps far past the slices below first */
        if (block < b.first || r >= b.slices) {
            outside = 1;
            break;
        }
        if (start[r] + fill[r] == start[r + 1])
            break;
        memcpy(out + (start[r] + fill[r]++) * FP, in + i * FP, FP);
    }
    restore_gil(state);
    memcpy(b.fills.buf, fill, (size_t)b.slices * 8);
    release_buckets(&b);
    PyBuffer_Release(&fps);
    if (outside) {
        PyErr_Format(PyExc_ValueError, "fingerprint %zd lies outside the buckets' blocks", i);
        return NULL;
    }
    return PyLong_FromSsize_t(i);
}

PyDoc_STRVAR(block_add_buckets_doc,
"block_add_buckets(filter, buckets) -> int\n\n"
"block_add of every bucket's fingerprints (see block_bucket), the slices in ascending order and each bucket's\n"
"entries in their order, so the filter's pages are touched once each, in ascending order, and each slice stays\n"
"in cache while its items are added; the next slice is streamed in address order meanwhile when it is dense.\n"
"Returns how many items had an unset bit (block_add's entries, summed: exactly as if added one at a time in\n"
"input order, since a block's items keep their order). The caller holds the write lock.");

static PyObject *py_block_add_buckets(PyObject *self, PyObject *args)
{
    PyObject *spec, *buckets;
    Blocked f;
    Buckets b;
    if (!PyArg_ParseTuple(args, "O!O!:block_add_buckets", &PyTuple_Type, &spec, &PyTuple_Type, &buckets))
        return NULL;
    if (get_blocked(spec, 1, &f) < 0)
        return NULL;
    if (get_buckets(buckets, f.blocks, 0, &b) < 0) {
        PyBuffer_Release(&f.view);
        return NULL;
    }
    const unsigned char *in = b.buffer.buf;
    const uint64_t *start = b.start, *fill = b.fill;
    int shift = b.shift;
    uint64_t slice_blocks = 1ULL << shift, added = 0, n = 0;
    for (uint64_t r = 0; r < b.slices; r++)
        n += fill[r];
    /* one windowed pass over the buckets in order: item i is issued (hashed, its block prefetched) BLOCK_WINDOW
     * items before it is set; the issue cursor is (r, k): entry k of bucket r */
    uint64_t masks[BLOCK_WINDOW][BLOCK_WORDS], at[BLOCK_WINDOW], r = 0, k = 0, streamed = 0, goal = 0, step = 0;
    PyThreadState *state = release_gil((Py_ssize_t)n);
    for (uint64_t i = 0; i < n + BLOCK_WINDOW; i++) {
        if (i >= BLOCK_WINDOW) {
            uint64_t j = i - BLOCK_WINDOW;
            added += block_set(f.u8 + at[j % BLOCK_WINDOW] * BLOCK_BYTES, masks[j % BLOCK_WINDOW]);
        }
        if (i < n) {
            if (k == fill[r] || i == 0) {  /* the first item of the next non-empty bucket */
                if (k == fill[r])
                    r++;
                for (k = 0; fill[r] == 0; r++)
                    ;
                uint64_t next = b.first + ((r + 1) << shift);  /* stream slice r+1 while bucket r is added, if dense */
                int dense = r + 1 < b.slices && fill[r + 1] * STREAM_DENSITY >= slice_blocks;
                streamed = next;
                goal = next << 16;
                step = dense ? (slice_blocks << 16) / fill[r] + 1 : 0;
            }
            uint64_t block = block_of(in + (start[r] + k++) * FP, &f, masks[i % BLOCK_WINDOW]);
            at[i % BLOCK_WINDOW] = block;
            __builtin_prefetch(f.u8 + block * BLOCK_BYTES, 1);
            goal += step;
            uint64_t until = goal >> 16 < f.blocks ? goal >> 16 : f.blocks;
            for (; streamed < until; streamed++)
                __builtin_prefetch(f.u8 + streamed * BLOCK_BYTES, 1);
        }
    }
    restore_gil(state);
    release_buckets(&b);
    PyBuffer_Release(&f.view);
    return PyLong_FromUnsignedLongLong(added);
}

/* -- URL canonicalisation ------------------------------------------------------------------------------ */

/* frontier.url.canonical's fast path (_canonical there, which is the reference) for a batch of URLs, in C: the
 * same steps on the same input, and None for anything the Python side must decide (see canonicalize_doc).
 * A URL is only read when it is ASCII; the output is built in a scratch buffer and copied into a new str. */

#define CANON_MAX_NAMES 64  /* session-id and tracking parameter names */

typedef struct {
    const char *s;
    Py_ssize_t n;
} Span;

typedef struct {
    int sort_query, strip_sids, strip_tracking, keep_fragment;
    Span sids[CANON_MAX_NAMES], tracking[CANON_MAX_NAMES], prefix;
    int n_sids, n_tracking;
    int relative;                     /* a base the fast path resolves references against */
    Span origin, path, query;         /* the base's parts */
    int base_query;                   /* the base has a query (perhaps empty) */
    Py_ssize_t base_slashes, base_amps; /* "/" in the base's path, "&" in its query */
} Canon;

typedef struct {
    const char *s;
    Py_ssize_t n, key, order;         /* a query param, its key's length, its place */
} Param;

/* Scratch buffers, grown to the largest URL of a batch: out, tmp and url hold `chars` characters, starts
 * `segments` offsets (one per "/" of a path), params `params` entries (one per "&" of a query). */
typedef struct {
    char *out, *tmp, *url;
    Py_ssize_t *starts;
    Param *params;
    Py_ssize_t chars, segments, params_cap;
} Scratch;

/* Grow *buffer to at least need items of size bytes (doubling), *cap its count; -1 with MemoryError. */
static int grow(void **buffer, Py_ssize_t *cap, Py_ssize_t need, size_t size)
{
    if (need <= *cap)
        return 0;
    Py_ssize_t to = need > 2 * *cap ? need : 2 * *cap;
    void *grown = PyMem_Realloc(*buffer, (size_t)to * size);
    if (grown == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    *buffer = grown;
    *cap = to;
    return 0;
}

static int scratch_fit(Scratch *s, Py_ssize_t chars, Py_ssize_t segments, Py_ssize_t params)
{
    Py_ssize_t out_cap = s->chars, tmp_cap = s->chars, url_cap = s->chars;
    int failed = grow((void **)&s->out, &out_cap, chars, 1) < 0 || grow((void **)&s->tmp, &tmp_cap, chars, 1) < 0 ||
                 grow((void **)&s->url, &url_cap, chars, 1) < 0;
    if (!failed)
        s->chars = url_cap;  /* all three grew alike */
    return failed || grow((void **)&s->starts, &s->segments, segments, sizeof(Py_ssize_t)) < 0 ||
           grow((void **)&s->params, &s->params_cap, params, sizeof(Param)) < 0 ? -1 : 0;
}

/* The characters the fast path takes in a path or query (_HEAD_UNSAFE's complement): printable ASCII but
 * " # < > \ ^ ` { } */
static inline int head_ok(unsigned char c)
{
    return c > 0x20 && c < 0x7f && c != '"' && c != '#' && c != '<' && c != '>' && c != '\\' && c != '^' &&
           c != '`' && c != '{' && c != '}';
}

static inline int hex_value(unsigned char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 : c >= 'a' && c <= 'f' ? c - 'a' + 10
                                                                                                          : -1;
}

static inline int is_alpha(unsigned char c)
{
    return (c | 0x20) >= 'a' && (c | 0x20) <= 'z';
}

static inline int is_digit(unsigned char c)
{
    return c >= '0' && c <= '9';
}

static inline unsigned char lower(unsigned char c)
{
    return c >= 'A' && c <= 'Z' ? c + 32 : c;
}

/* Copy n characters with every escape %XX normalised as _ESCAPES does (unreserved decoded, hex uppercased);
 * returns the length written. A match of _PCT_FIX cannot overlap an escape that needs no change, so fixing
 * every escape left to right is the same as its re.sub. */
static Py_ssize_t fix_escapes(char *to, const char *from, Py_ssize_t n)
{
    static const char HEX[] = "0123456789ABCDEF";
    const char *pct = memchr(from, '%', (size_t)n);
    if (pct == NULL) {
        memcpy(to, from, (size_t)n);
        return n;
    }
    Py_ssize_t w = pct - from;
    memcpy(to, from, (size_t)w);
    for (Py_ssize_t i = w; i < n; i++) {
        int hi, lo;
        if (from[i] == '%' && i + 2 < n && (hi = hex_value(from[i + 1])) >= 0 && (lo = hex_value(from[i + 2])) >= 0) {
            unsigned char c = (unsigned char)(hi << 4 | lo);
            if (is_alpha(c) || is_digit(c) || c == '-' || c == '.' || c == '_' || c == '~') {
                to[w++] = (char)c;
            } else {
                to[w++] = '%';
                to[w++] = HEX[hi];
                to[w++] = HEX[lo];
            }
            i += 2;
        } else {
            to[w++] = from[i];
        }
    }
    return w;
}

/* True if the n characters at s, lowercased, are name. */
static inline int lower_equals(const char *s, Py_ssize_t n, Span name)
{
    if (n != name.n)
        return 0;
    for (Py_ssize_t i = 0; i < n; i++)
        if (lower((unsigned char)s[i]) != (unsigned char)name.s[i])
            return 0;
    return 1;
}

/* _PATH_SESSION_ID.sub("", path) in place: ";name=..." up to the next "/" or ";" removed, name any case. */
static Py_ssize_t strip_path_sids(char *p, Py_ssize_t n, const Canon *c)
{
    Py_ssize_t w = 0, i = 0;
    while (i < n) {
        if (p[i] == ';') {
            Py_ssize_t m = 0;
            for (int k = 0; k < c->n_sids && m == 0; k++) {
                Span name = c->sids[k];
                if (i + 1 + name.n < n && p[i + 1 + name.n] == '=' && lower_equals(p + i + 1, name.n, name))
                    m = name.n + 2;
            }
            if (m > 0) {
                for (i += m; i < n && p[i] != '/' && p[i] != ';'; i++)
                    ;
                continue;
            }
        }
        p[w++] = p[i++];
    }
    return w;
}

static inline int has_dot_segment_mark(const char *p, Py_ssize_t n)  /* "/." in p */
{
    for (const char *slash = memchr(p, '/', (size_t)n); slash != NULL;
         slash = memchr(slash + 1, '/', (size_t)(p + n - slash - 1)))
        if (slash + 1 < p + n && slash[1] == '.')
            return 1;
    return 0;
}

/* _remove_dot_segments (its segment loop; its normpath branch agrees) of the n characters at from, which start
 * with "/", into to (room for n + 1); returns the length written. starts: room for n + 1 offsets. */
static Py_ssize_t remove_dot_segments(char *to, const char *from, Py_ssize_t n, Py_ssize_t *starts)
{
    Py_ssize_t w = 1, kept = 0, i = 1;
    int dots;
    to[0] = '/';
    for (;;) {  /* each segment is written with a "/" after it; the last "/" is dropped at the end */
        const char *seg = from + i, *slash = memchr(seg, '/', (size_t)(n - i));
        Py_ssize_t len = slash ? slash - seg : n - i;
        dots = len == 1 && seg[0] == '.' ? 1 : len == 2 && seg[0] == '.' && seg[1] == '.' ? 2 : 0;
        if (dots == 2) {
            if (kept > 0)
                w = starts[--kept];
        } else if (dots == 0) {
            starts[kept++] = w;
            memcpy(to + w, seg, (size_t)len);
            w += len;
            to[w++] = '/';
        }
        if (slash == NULL)
            break;
        i += len + 1;
    }
    if (dots) {  /* a last "." or "..": the path ends with "/" */
        kept++;
        to[w++] = '/';
    }
    return kept > 0 ? w - 1 : 1;
}

static int param_order(const void *a, const void *b)
{
    const Param *x = a, *y = b;
    int c = memcmp(x->s, y->s, (size_t)(x->key < y->key ? x->key : y->key));
    if (c == 0)
        c = x->key < y->key ? -1 : x->key > y->key;
    return c != 0 ? c : x->order < y->order ? -1 : x->order > y->order;
}

static int dropped_param(const char *key, Py_ssize_t n, const Canon *c)
{
    if (c->strip_sids)
        for (int k = 0; k < c->n_sids; k++)
            if (lower_equals(key, n, c->sids[k]))
                return 1;
    if (c->strip_tracking) {
        for (int k = 0; k < c->n_tracking; k++)
            if (lower_equals(key, n, c->tracking[k]))
                return 1;
        if (n >= c->prefix.n && lower_equals(key, c->prefix.n, c->prefix))
            return 1;
    }
    return 0;
}

/* _normalize_query of the n characters at q into to (room for n); returns the length written. */
static Py_ssize_t normalize_query(char *to, const char *q, Py_ssize_t n, const Canon *c, Scratch *s)
{
    n = fix_escapes(s->tmp, q, n);
    q = s->tmp;
    int split = c->strip_sids || c->strip_tracking;
    if (!split && !(c->sort_query && memchr(q, '&', (size_t)n) != NULL)) {
        memcpy(to, q, (size_t)n);
        return n;
    }
    Py_ssize_t count = 0, w = 0;
    for (Py_ssize_t i = 0; i <= n;) {
        const char *amp = memchr(q + i, '&', (size_t)(n - i));
        Py_ssize_t len = amp ? amp - (q + i) : n - i;
        if (len > 0) {
            const char *eq = memchr(q + i, '=', (size_t)len);
            Py_ssize_t key = eq ? eq - (q + i) : len;
            if (!split || !dropped_param(q + i, key, c)) {
                s->params[count] = (Param){q + i, len, key, count};
                count++;
            }
        }
        i += len + 1;
    }
    if (c->sort_query && count > 1) {
        if (count <= 16) {  /* insertion sort, stable */
            for (Py_ssize_t i = 1; i < count; i++) {
                Param p = s->params[i];
                Py_ssize_t j = i;
                for (; j > 0 && param_order(&s->params[j - 1], &p) > 0; j--)
                    s->params[j] = s->params[j - 1];
                s->params[j] = p;
            }
        } else {  /* stable too: ties are ordered by place */
            qsort(s->params, (size_t)count, sizeof(Param), param_order);
        }
    }
    for (Py_ssize_t i = 0; i < count; i++) {
        if (i > 0)
            to[w++] = '&';
        memcpy(to + w, s->params[i].s, (size_t)s->params[i].n);
        w += s->params[i].n;
    }
    return w;
}

/* "http://" or "https://" in any case at the start of the n characters at u: its length, else 0. */
static inline Py_ssize_t http_prefix(const char *u, Py_ssize_t n)
{
    if (n < 7 || lower(u[0]) != 'h' || lower(u[1]) != 't' || lower(u[2]) != 't' || lower(u[3]) != 'p')
        return 0;
    Py_ssize_t i = lower(u[4]) == 's' ? 5 : 4;
    return i + 3 <= n && u[i] == ':' && u[i + 1] == '/' && u[i + 2] == '/' ? i + 3 : 0;
}

/* The canonical origin of u[0:pre], which starts with "http(s)://" (scheme characters), written to `to` as
 * _fast_origin writes it; *end is where the path starts (pre: none). Returns its length, -1 if not fast. */
static Py_ssize_t fast_origin(char *to, const char *u, Py_ssize_t pre, Py_ssize_t scheme, Py_ssize_t *end)
{
    Py_ssize_t i = scheme, label = scheme, labels = 1, octets = 1;
    for (; i < pre; i++) {
        unsigned char ch = u[i];
        if (ch == '.') {
            if (i == label || i - label > 63)
                return -1;
            octets &= i - label <= 3 && (i - label == 1 || u[label] != '0') &&
                      (i - label < 3 || memcmp(u + label, "255", 3) <= 0);
            label = i + 1;
            labels++;
        } else if (!(is_alpha(ch) || is_digit(ch) || ch == '-' || ch == '_')) {
            break;
        } else {
            octets &= is_digit(ch);
        }
    }
    Py_ssize_t host = i, last = i - label;
    if (last == 0 || last > 63 || host - scheme > 253)
        return -1;
    if (!is_alpha(u[label])) {  /* not a name: a dotted quad of octets written without leading zeros */
        octets &= last <= 3 && (last == 1 || u[label] != '0') && (last < 3 || memcmp(u + label, "255", 3) <= 0);
        if (!octets || labels != 4)
            return -1;
    }
    Py_ssize_t port = i, digits = 0;
    if (i < pre && u[i] == ':')
        for (i++; i < pre && is_digit(u[i]); i++)
            ;
    if (i < pre && u[i] != '/')
        return -1;
    *end = i;
    Py_ssize_t w = 0;
    for (Py_ssize_t k = 0; k < host; k++)
        to[w++] = (char)lower(u[k]);
    for (Py_ssize_t k = scheme; k + 4 <= host; k++)
        if (to[k] == 'x' && to[k + 1] == 'n' && to[k + 2] == '-' && to[k + 3] == '-')
            return -1;
    if (i > port + 1) {  /* a port: leading zeros dropped, the scheme's default dropped */
        Py_ssize_t first = port + 1;
        while (first < i && u[first] == '0')
            first++;
        digits = i - first;
        if (digits > 5)
            return -1;
        long value = 0;
        for (Py_ssize_t k = first; k < i; k++)
            value = value * 10 + (u[k] - '0');
        if (value > 65535)
            return -1;
        if (value != (scheme == 8 ? 443 : 80)) {
            to[w++] = ':';
            if (digits == 0)
                to[w++] = '0';
            memcpy(to + w, u + first, (size_t)digits);
            w += digits;
        }
    }
    return w;
}

/* The longest URL the fast path takes: a longer one (a hostile page's; limits.max_url_length is 2,048 by
 * default and workers/links.py refuses hrefs past 16 times it) is left to Python, so the scratch buffers stay
 * small whatever a page holds. */
#define CANON_FAST_MAX 65536

static Py_ssize_t count_of(const char *u, Py_ssize_t n, char ch)
{
    Py_ssize_t count = 0;
    if (n == 0)  /* u may be NULL (a base without a query) */
        return 0;
    for (const char *at = memchr(u, ch, (size_t)n); at != NULL; at = memchr(at + 1, ch, (size_t)(u + n - at - 1)))
        count++;
    return count;
}

/* 0 if canonical_at surely refuses u, decided before any scratch is sized: not "http(s)://" and (no base, or
 * another scheme: "data:", "javascript:", ...). */
static int fast_candidate(const char *u, Py_ssize_t n, const Canon *c)
{
    if (http_prefix(u, n) > 0)
        return 1;
    if (!c->relative)
        return 0;
    if (n == 0 || !is_alpha((unsigned char)u[0]))
        return 1;
    Py_ssize_t k = 1;
    while (k < n && (is_alpha((unsigned char)u[k]) || is_digit((unsigned char)u[k]) || u[k] == '+' || u[k] == '-' ||
                     u[k] == '.'))
        k++;
    return k == n || u[k] != ':';  /* "name:": another scheme (or "http:" without "//"), refused */
}

/* canonical_one's work, s fitted to u already */
static Py_ssize_t canonical_at(const char *u, Py_ssize_t n, const Canon *c, Scratch *s)
{
    const char *hash = memchr(u, '#', (size_t)n), *mark;
    Py_ssize_t head = hash ? hash - u : n;
    mark = memchr(u, '?', (size_t)head);
    Py_ssize_t pre = mark ? mark - u : head;
    Span query = {mark ? mark + 1 : "", mark ? head - pre - 1 : 0}, dir = {"", 0}, path;
    int has_query = mark != NULL;
    char *o = s->out;
    Py_ssize_t w, from, scheme = http_prefix(u, pre);
    if (scheme > 0) {  /* absolute */
        w = fast_origin(o, u, pre, scheme, &from);
        if (w < 0)
            return -1;
        path = from < pre ? (Span){u + from, pre - from} : (Span){"/", 1};
    } else {  /* a reference: resolved against the base when it is fast */
        const char *colon = memchr(u, ':', (size_t)pre);
        if (!c->relative || (colon && (colon - u == 4 || colon - u == 5)))
            return -1;
        if (n >= 2 && u[0] == '/' && u[1] == '/') {  /* scheme-relative: an absolute URL of the base's scheme */
            Py_ssize_t colon_at = http_prefix(c->origin.s, c->origin.n) - 2;  /* after "http:" or "https:" */
            memcpy(s->url, c->origin.s, (size_t)colon_at);
            memcpy(s->url + colon_at, u, (size_t)n);
            return canonical_at(s->url, colon_at + n, c, s);
        }
        if (colon && colon > u && is_alpha(u[0])) {  /* _SCHEME.match: not a reference but another scheme */
            const char *k = u + 1;
            while (k < colon && (is_alpha(*k) || is_digit(*k) || *k == '+' || *k == '-' || *k == '.'))
                k++;
            if (k == colon)
                return -1;
        }
        from = 0;
        memcpy(o, c->origin.s, (size_t)c->origin.n);
        w = c->origin.n;
        path = (Span){u, pre};
        if (pre == 0) {
            path = c->path;
            if (!has_query && c->base_query)
                query = c->query, has_query = 1;
        } else if (u[0] != '/') {
            dir = c->path;
            while (dir.n > 0 && dir.s[dir.n - 1] != '/')
                dir.n--;
        }
    }
    for (Py_ssize_t k = from; k < head; k++)
        if (!head_ok((unsigned char)u[k]))
            return -1;
    if (mark && memchr(mark, '\'', (size_t)(head - pre)) != NULL)
        return -1;
    /* the dedup rules: escapes first ("%2e" is "."), then session ids, then dot segments */
    Py_ssize_t p0 = w;
    w += fix_escapes(o + w, dir.s, dir.n);
    w += fix_escapes(o + w, path.s, path.n);
    if (c->strip_sids && memchr(o + p0, ';', (size_t)(w - p0)) != NULL)
        w = p0 + strip_path_sids(o + p0, w - p0, c);
    if (has_dot_segment_mark(o + p0, w - p0)) {
        memcpy(s->tmp, o + p0, (size_t)(w - p0));
        w = p0 + remove_dot_segments(o + p0, s->tmp, w - p0, s->starts);
    }
    if (query.n > 0) {
        Py_ssize_t q;
        if (c->strip_sids || c->strip_tracking || memchr(query.s, '&', (size_t)query.n) ||
            memchr(query.s, '%', (size_t)query.n))
            q = normalize_query(o + w + 1, query.s, query.n, c, s);
        else
            memcpy(o + w + 1, query.s, (size_t)(q = query.n));
        if (q > 0) {
            o[w] = '?';
            w += 1 + q;
        }
    }
    if (hash && c->keep_fragment && hash + 1 < u + n) {
        for (const char *k = hash + 1; k < u + n; k++)
            if (*k <= 0x20 || *k == 0x7f || *k == '"' || *k == '<' || *k == '>' || *k == '`')
                return -1;
        o[w++] = '#';
        w += fix_escapes(o + w, hash + 1, u + n - hash - 1);
    }
    return w;
}

/* An ASCII str's characters, or -1 with TypeError naming what */
static int ascii_span(PyObject *obj, Span *span, const char *what)
{
    if (!PyUnicode_Check(obj) || !PyUnicode_IS_ASCII(obj)) {
        PyErr_Format(PyExc_TypeError, "%s: expected an ASCII str, got %.100R", what, obj);
        return -1;
    }
    span->s = PyUnicode_DATA(obj);
    span->n = PyUnicode_GET_LENGTH(obj);
    return 0;
}

static int name_spans(PyObject *names, Span *spans, int *count, const char *what)
{
    Py_ssize_t n = PyTuple_GET_SIZE(names);
    if (n > CANON_MAX_NAMES) {
        PyErr_Format(PyExc_ValueError, "%s: at most %d names", what, CANON_MAX_NAMES);
        return -1;
    }
    for (Py_ssize_t k = 0; k < n; k++) {
        if (ascii_span(PyTuple_GET_ITEM(names, k), &spans[k], what) < 0)
            return -1;
        for (Py_ssize_t j = 0; j < spans[k].n; j++)
            if (spans[k].s[j] >= 'A' && spans[k].s[j] <= 'Z') {
                PyErr_Format(PyExc_ValueError, "%s: lowercase names expected", what);
                return -1;
            }
    }
    *count = (int)n;
    return 0;
}

PyDoc_STRVAR(canonicalize_doc,
"canonicalize(urls, rules, names, base) -> (list[str | None], list[int])\n\n"
"frontier.url.canonical's fast path for each URL: the canonical form, or None where Python must decide (not a\n"
"str, not ASCII, neither \"http(s)://\" with a plain host nor a reference to the base, a character the\n"
"standard encodes, ...); a str here is always canonicalize(url, base, rules). rules: (sort_query,\n"
"strip_session_ids, strip_tracking, keep_fragment); names: (session-id param names, tracking param names,\n"
"tracking prefix), lowercase; base: None (no base, or one the fast path cannot resolve against) or its\n"
"(origin, path, query or None) from _base_info. Also returns the positions of the Nones, ascending.");

/* The canonical form of the n ASCII characters at u into s->out when the fast path takes them: its length;
 * -1 when not; -2 on an error (set). The steps and their order are _canonical's. */
static Py_ssize_t canonical_one(const char *u, Py_ssize_t n, const Canon *c, Scratch *s)
{
    if (n > CANON_FAST_MAX || !fast_candidate(u, n, c))
        return -1;
    Py_ssize_t slashes = count_of(u, n, '/') + c->base_slashes, amps = count_of(u, n, '&') + c->base_amps;
    return scratch_fit(s, n + c->origin.n + c->path.n + c->query.n + 16, slashes + 2, amps + 2) < 0
               ? -2 : canonical_at(u, n, c, s);
}

static PyObject *py_canonicalize(PyObject *self, PyObject *args)
{
    PyObject *urls, *sids, *tracking, *prefix, *base, *seq, *out, *missed, *pair = NULL;
    Canon c;
    Scratch s = {NULL, NULL, NULL, NULL, NULL, 0, 0, 0};
    memset(&c, 0, sizeof(c));
    if (!PyArg_ParseTuple(args, "O(pppp)(O!O!U)O:canonicalize", &urls, &c.sort_query, &c.strip_sids,
                          &c.strip_tracking, &c.keep_fragment, &PyTuple_Type, &sids, &PyTuple_Type, &tracking, &prefix,
                          &base))
        return NULL;
    if (name_spans(sids, c.sids, &c.n_sids, "session-id names") < 0 ||
        name_spans(tracking, c.tracking, &c.n_tracking, "tracking names") < 0 ||
        ascii_span(prefix, &c.prefix, "tracking prefix") < 0)
        return NULL;
    if (base != Py_None) {
        PyObject *origin, *path, *query;
        if (!PyTuple_Check(base)) {
            PyErr_Format(PyExc_TypeError, "canonicalize base: None or a tuple (origin, path, query) expected, got %.100s",
                         Py_TYPE(base)->tp_name);
            return NULL;
        }
        if (!PyArg_ParseTuple(base, "UUO:canonicalize base", &origin, &path, &query) ||
            ascii_span(origin, &c.origin, "base origin") < 0 || ascii_span(path, &c.path, "base path") < 0 ||
            (query != Py_None && ascii_span(query, &c.query, "base query") < 0))
            return NULL;
        if (http_prefix(c.origin.s, c.origin.n) == 0 || c.path.n == 0 || c.path.s[0] != '/') {
            PyErr_SetString(PyExc_ValueError, "base: an origin \"http(s)://...\" and a path starting with \"/\"");
            return NULL;
        }
        c.relative = 1;
        c.base_slashes = count_of(c.path.s, c.path.n, '/');
        c.base_amps = count_of(c.query.s, c.query.n, '&');
        c.base_query = query != Py_None;
    }
    if ((seq = PySequence_Fast(urls, "expected a sequence of URLs")) == NULL)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq), i = 0;
    PyObject **items = PySequence_Fast_ITEMS(seq);
    out = PyList_New(n);
    missed = PyList_New(0);
    for (; out != NULL && missed != NULL && i < n; i++) {
        PyObject *url = items[i], *result = Py_None;
        if (PyUnicode_Check(url) && PyUnicode_IS_ASCII(url)) {
            Py_ssize_t size = PyUnicode_GET_LENGTH(url);
            const char *text = PyUnicode_DATA(url);
            Py_ssize_t len = canonical_one(text, size, &c, &s);
            if (len == -2)
                break;
            if (len == size && PyUnicode_CheckExact(url) && memcmp(s.out, text, (size_t)len) == 0) {
                result = url;  /* canonical already */
                Py_INCREF(url);
            } else if (len >= 0) {
                if ((result = PyUnicode_New(len, 127)) == NULL)
                    break;
                memcpy(PyUnicode_1BYTE_DATA(result), s.out, (size_t)len);
            }
        }
        if (result == Py_None) {
            PyObject *at = PyLong_FromSsize_t(i);
            int failed = at == NULL || PyList_Append(missed, at) < 0;
            Py_XDECREF(at);
            if (failed)
                break;
            Py_INCREF(Py_None);
        }
        PyList_SET_ITEM(out, i, result);
    }
    if (out != NULL && missed != NULL && i == n)
        pair = PyTuple_Pack(2, out, missed);
    Py_XDECREF(out);
    Py_XDECREF(missed);
    Py_DECREF(seq);
    PyMem_Free(s.out);
    PyMem_Free(s.tmp);
    PyMem_Free(s.url);
    PyMem_Free(s.starts);
    PyMem_Free(s.params);
    return pair;
}

/* -- the switch ------------------------------------------------------------------------------------------ */

PyDoc_STRVAR(switched_off_doc,
"switched_off() -> bool: FRONTIER_NO_NATIVE is set to anything but \"\" or \"0\" (frontier.native). Read with\n"
"getenv, which os.environ's changes reach (putenv): a per-call check at no cost, where os.environ.get of an\n"
"unset name costs a caught KeyError.");

static PyObject *py_switched_off(PyObject *self, PyObject *unused)
{
    const char *value = getenv("FRONTIER_NO_NATIVE");
    return PyBool_FromLong(value != NULL && value[0] != '\0' && strcmp(value, "0") != 0);
}

/* -- sorted runs of the fingerprint log (frontier.seen.fpruns) ------------------------------------------------ */

typedef struct {
    uint64_t hi, lo;  /* the fingerprint's big-endian halves: (hi, lo) order is byte order */
} RunKey;

static inline int run_key_less(RunKey a, RunKey b)
{
    return a.hi < b.hi || (a.hi == b.hi && a.lo < b.lo);
}

static inline RunKey run_key_at(const unsigned char *p)
{
    RunKey k = {load_be64(p), load_be64(p + 8)};
    return k;
}

static int run_key_compare(const void *a, const void *b)
{
    const RunKey *x = a, *y = b;
    return run_key_less(*x, *y) ? -1 : run_key_less(*y, *x);
}

/* Write sorted keys to `out` as fingerprints, each distinct one once; returns how many. */
static Py_ssize_t put_unique(const RunKey *keys, Py_ssize_t n, unsigned char *out)
{
    Py_ssize_t m = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (m && keys[i].hi == keys[i - 1].hi && keys[i].lo == keys[i - 1].lo)
            continue;
        uint64_t hi = __builtin_bswap64(keys[i].hi), lo = __builtin_bswap64(keys[i].lo);
        memcpy(out + m * FP, &hi, 8);
        memcpy(out + m * FP + 8, &lo, 8);
        m++;
    }
    return m;
}

#define MAX_SORT_BUCKETS (1u << 16)
#define FIRST_BUCKETS 256u  /* a big sort's first pass: few enough places written at once to stay in the cache */
#define FIRST_PASS_MIN 4096u
#define INSERTION_MAX 32
#define MAX_MERGE_INPUTS 256

/* Keys of one bucket in order: insertion sort, qsort past INSERTION_MAX (skewed input stays n log n). */
static void sort_bucket(RunKey *k, uint32_t len)
{
    if (len > INSERTION_MAX) {
        qsort(k, len, sizeof(RunKey), run_key_compare);
        return;
    }
    for (uint32_t i = 1; i < len; i++) {
        RunKey v = k[i];
        uint32_t j = i;
        for (; j > 0 && run_key_less(v, k[j - 1]); j--)
            k[j] = k[j - 1];
        k[j] = v;
    }
}

/* One American flag pass: keys[0..n) placed in `buckets` (a power of two, >= 2) buckets by the top bits of their
 * first half's offset from the smallest, in place; bucket b is then [start[b], start[b + 1]). `next` holds
 * `buckets` entries, `start` one more. */
static void flag_pass(RunKey *keys, uint32_t n, uint32_t buckets, uint32_t *start, uint32_t *next)
{
    uint64_t least = UINT64_MAX, most = 0;
    for (uint32_t i = 0; i < n; i++) {
        least = keys[i].hi < least ? keys[i].hi : least;
        most = keys[i].hi > most ? keys[i].hi : most;
    }
    int shift = 0;  /* bucket = (hi - least) >> shift < buckets */
    while (n && ((most - least) >> shift) >= buckets)
        shift++;
    memset(start, 0, ((size_t)buckets + 1) * sizeof(uint32_t));
    for (uint32_t i = 0; i < n; i++)
        start[((keys[i].hi - least) >> shift) + 1]++;
    for (uint32_t b = 1; b <= buckets; b++)
        start[b] += start[b - 1];
    memcpy(next, start, (size_t)buckets * sizeof(uint32_t));
    for (uint32_t b = 0; b < buckets; b++)  /* each key swapped straight to its bucket's next free place */
        while (next[b] < start[b + 1]) {
            RunKey k = keys[next[b]];
            uint32_t to = (uint32_t)((k.hi - least) >> shift);
            if (to == b) {
                next[b]++;
                continue;
            }
            keys[next[b]] = keys[next[to]];
            keys[next[to]++] = k;
        }
}

/* Buckets for n keys: about 4 keys each (fingerprints are uniform over any key range), at least 2. */
static uint32_t buckets_for(uint32_t n)
{
    uint32_t buckets = 2;
    while (buckets < MAX_SORT_BUCKETS && buckets < n / 4)
        buckets <<= 1;
    return buckets;
}

/* keys[0..n) in order: flag passes down to about 4 keys a bucket, then sort_bucket. A big sort takes a first
 * pass of FIRST_BUCKETS buckets, so that each one's second pass runs in the cache (a single pass into n / 4
 * buckets writes all over the array: measured 3-4x slower from 10^5 keys). */
static void sort_keys(RunKey *keys, uint32_t n, uint32_t *start, uint32_t *next)
{
    uint32_t first[FIRST_BUCKETS + 1], first_next[FIRST_BUCKETS];
    uint32_t outer = n >= FIRST_PASS_MIN ? FIRST_BUCKETS : 1;
    if (outer > 1)
        flag_pass(keys, n, outer, first, first_next);
    else {
        first[0] = 0;
        first[1] = n;
    }
    for (uint32_t o = 0; o < outer; o++) {
        RunKey *part = keys + first[o];
        uint32_t len = first[o + 1] - first[o], buckets = buckets_for(len);
        if (len <= INSERTION_MAX) {
            sort_bucket(part, len);
            continue;
        }
        flag_pass(part, len, buckets, start, next);
        for (uint32_t b = 0; b < buckets; b++)
            sort_bucket(part + start[b], start[b + 1] - start[b]);
    }
}

/* The fingerprints of `parts` buffers in byte order, each once, as a new bytes object. The input is read once,
 * into keys (the loops run without the GIL: a buffer another thread writes meanwhile must not change the counts),
 * then sorted by sort_keys. */
static PyObject *sort_parts(const Py_buffer *views, Py_ssize_t parts, Py_ssize_t n)
{
    if (n > (Py_ssize_t)UINT32_MAX)
        return PyErr_NoMemory();
    RunKey *keys = PyMem_RawMalloc((size_t)(n ? n : 1) * sizeof(RunKey));
    uint32_t *start = PyMem_RawMalloc(((size_t)MAX_SORT_BUCKETS + 1) * sizeof(uint32_t));
    uint32_t *next = PyMem_RawMalloc((size_t)MAX_SORT_BUCKETS * sizeof(uint32_t));
    PyObject *out = NULL;
    if (keys == NULL || start == NULL || next == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    PyThreadState *state = release_gil(n);
    Py_ssize_t got = 0;
    for (Py_ssize_t p = 0; p < parts; p++)
        for (Py_ssize_t i = 0; i < views[p].len / FP && got < n; i++)
            keys[got++] = run_key_at((const unsigned char *)views[p].buf + i * FP);
    sort_keys(keys, (uint32_t)n, start, next);
    restore_gil(state);
    out = PyBytes_FromStringAndSize(NULL, n * FP);
    if (out != NULL && _PyBytes_Resize(&out, put_unique(keys, n, (unsigned char *)PyBytes_AS_STRING(out)) * FP) < 0)
        out = NULL;
done:
    PyMem_RawFree(keys);
    PyMem_RawFree(start);
    PyMem_RawFree(next);
    return out;
}

PyDoc_STRVAR(sort_unique_doc,
"sort_unique(fps) -> bytes\n\n"
"The fingerprints of a joined buffer in byte order, each once (a flush of the pending set into a run): a counting\n"
"pass by their top bits, then small sorts.");

static PyObject *py_sort_unique(PyObject *self, PyObject *arg)
{
    Py_buffer fps;
    Py_ssize_t n;
    if (get_fps(arg, &fps, &n) < 0)
        return NULL;
    PyObject *out = sort_parts(&fps, 1, n);
    PyBuffer_Release(&fps);
    return out;
}

PyDoc_STRVAR(merge_unique_doc,
"merge_unique(parts) -> bytes\n\n"
"The fingerprints of a sequence of joined buffers, each sorted in byte order, merged in byte order, each once\n"
"(a merge step of the fingerprint log). Sorted as sort_unique sorts one buffer: for uniform keys a counting pass\n"
"costs less than a k-way merge's comparisons (measured: 16 inputs merged through a loser tree, 31 ns an entry).");

static PyObject *py_merge_unique(PyObject *self, PyObject *arg)
{
    PyObject *seq = PySequence_Fast(arg, "merge_unique wants a sequence of buffers");
    if (seq == NULL)
        return NULL;
    Py_ssize_t k = PySequence_Fast_GET_SIZE(seq), total = 0, got = 0;
    if (k > MAX_MERGE_INPUTS) {
        Py_DECREF(seq);
        return PyErr_Format(PyExc_ValueError, "merge_unique: at most %d inputs, got %zd", MAX_MERGE_INPUTS, k);
    }
    Py_buffer views[MAX_MERGE_INPUTS];
    PyObject *out = NULL;
    for (; got < k; got++) {
        Py_ssize_t n;
        if (get_fps(PySequence_Fast_GET_ITEM(seq, got), &views[got], &n) < 0)
            goto done;
        total += n;
    }
    out = sort_parts(views, k, total);
done:
    for (Py_ssize_t j = 0; j < got; j++)
        PyBuffer_Release(&views[j]);
    Py_DECREF(seq);
    return out;
}

PyDoc_STRVAR(chunk_has_doc,
"chunk_has(chunk, fp) -> bool\n\n"
"True if a chunk of a sorted run (fingerprints joined in byte order) holds the 16-byte fp: a binary search (an\n"
"exact-mode confirm; bytes.find scanned the chunk, a quarter of a confirm's time at 10^7).");

static PyObject *py_chunk_has(PyObject *self, PyObject *args)
{
    Py_buffer chunk, fp;
    Py_ssize_t n;
    if (!PyArg_ParseTuple(args, "y*y*:chunk_has", &chunk, &fp))
        return NULL;
    if (fp.len != FP || chunk.len % FP) {
        PyErr_Format(PyExc_ValueError, "chunk_has: a chunk of whole fingerprints and one fingerprint of %d bytes, "
                     "got %zd and %zd bytes", FP, chunk.len, fp.len);
        PyBuffer_Release(&chunk);
        PyBuffer_Release(&fp);
        return NULL;
    }
    n = chunk.len / FP;
    const unsigned char *base = chunk.buf;
    RunKey want = run_key_at(fp.buf);
    Py_ssize_t lo = 0, hi = n;  /* the first entry not below want is in [lo, hi] */
    while (lo < hi) {
        Py_ssize_t mid = lo + (hi - lo) / 2;
        if (run_key_less(run_key_at(base + mid * FP), want))
            lo = mid + 1;
        else
            hi = mid;
    }
    int found = lo < n && memcmp(base + lo * FP, fp.buf, FP) == 0;
    PyBuffer_Release(&chunk);
    PyBuffer_Release(&fp);
    return PyBool_FromLong(found);
}

/* -- a batch of probes against the sorted runs held in memory (frontier.seen.fpruns.find_cached) ----------- */

typedef struct {
    Py_buffer hi, lo;        /* the run's fingerprints as two native u64 arrays, sorted by (hi, lo) */
    Py_buffer filter;        /* its RunFilter's bytes (blocks x 64), or none (filter.obj NULL) */
    Py_ssize_t n;
    uint64_t first, last;    /* the range of first halves a lookup may find in it, both included */
    uint64_t blocks;
} CachedRun;

#define RUN_FILTER_HASHES 3  /* fpruns.RunFilter.HASHES */
#define RUN_FILTER_BLOCK 64  /* fpruns.RunFilter.BLOCK_BYTES: 512 bits */

/* fpruns.RunFilter.may_hold for one probe: the block from the top of the first half, 3 bits from the second */
static inline int run_filter_allows(const CachedRun *r, uint64_t hi, uint64_t lo)
{
    if (r->filter.obj == NULL)
        return 1;
    const unsigned char *bits = r->filter.buf;
    uint64_t base = ((hi >> 32) * r->blocks >> 32) * 512;  /* u64 wrap-around, as numpy's */
    for (int i = 0; i < RUN_FILTER_HASHES; i++) {
        uint64_t bit = base + ((lo >> (9 * i)) & 511);
        if (!((bits[bit >> 3] >> (bit & 7)) & 1))
            return 0;
    }
    return 1;
}

static inline int pair_less(const CachedRun *r, Py_ssize_t i, uint64_t hi, uint64_t lo)
{
    uint64_t h = u64_at(r->hi.buf, i);
    return h < hi || (h == hi && u64_at(r->lo.buf, i) < lo);
}

/* Where a probe's first half would lie if a run's are uniform between its first and last entries */
static inline Py_ssize_t pair_guess(const CachedRun *r, uint64_t hi)
{
    uint64_t h0 = u64_at(r->hi.buf, 0), h1 = u64_at(r->hi.buf, r->n - 1);
    if (hi <= h0 || h1 <= h0)
        return 0;
    if (hi >= h1)
        return r->n - 1;
    return (Py_ssize_t)((unsigned __int128)(hi - h0) * (uint64_t)(r->n - 1) / (h1 - h0));
}

/* Prefetch the cache lines a probe will read first: its filter block and its guessed place in the run */
static inline void prefetch_pairs(const CachedRun *r, uint64_t hi)
{
    if (r->filter.obj != NULL)
        __builtin_prefetch((const unsigned char *)r->filter.buf + ((hi >> 32) * r->blocks >> 32) * RUN_FILTER_BLOCK, 0);
    Py_ssize_t at = pair_guess(r, hi);
    __builtin_prefetch((const unsigned char *)r->hi.buf + 8 * at, 0);
    __builtin_prefetch((const unsigned char *)r->lo.buf + 8 * at, 0);
}

/* 1 if the run holds (hi, lo): from the interpolated guess, gallop to a bracket, then a binary search in it
 * (about 2 cache misses a probe where a binary search over 2^17 entries takes 17). */
static int pairs_hold(const CachedRun *r, uint64_t hi, uint64_t lo)
{
    Py_ssize_t n = r->n, pos = pair_guess(r, hi), a, b, step = 1;  /* the first entry >= probe is in [a, b] */
    if (pair_less(r, pos, hi, lo)) {
        a = pos + 1;
        for (;;) {
            Py_ssize_t c = pos + step;
            if (c >= n) {
                b = n;
                break;
            }
            if (!pair_less(r, c, hi, lo)) {
                b = c;
                break;
            }
            a = c + 1;
            step <<= 1;
        }
    } else {
        b = pos;
        for (;;) {
            Py_ssize_t c = pos - step;
            if (c < 0) {
                a = 0;
                break;
            }
            if (pair_less(r, c, hi, lo)) {
                a = c + 1;
                break;
            }
            b = c;
            step <<= 1;
        }
    }
    while (a < b) {
        Py_ssize_t mid = a + (b - a) / 2;
        if (pair_less(r, mid, hi, lo))
            a = mid + 1;
        else
            b = mid;
    }
    return a < n && u64_at(r->hi.buf, a) == hi && u64_at(r->lo.buf, a) == lo;
}

static void release_cached(CachedRun *r)
{
    if (r->hi.obj)
        PyBuffer_Release(&r->hi);
    if (r->lo.obj)
        PyBuffer_Release(&r->lo);
    if (r->filter.obj)
        PyBuffer_Release(&r->filter);
}

/* A run tuple (hi, lo, first, last, filter or None, blocks) of find_cached */
static int get_cached(PyObject *spec, CachedRun *r)
{
    PyObject *hi, *lo, *filter;
    unsigned long long first, last, blocks;
    if (!PyTuple_Check(spec)) {
        PyErr_SetString(PyExc_TypeError, "runs_find: a run is a tuple (hi, lo, first, last, filter, blocks)");
        return -1;
    }
    if (!PyArg_ParseTuple(spec, "OOKKOK:runs_find run", &hi, &lo, &first, &last, &filter, &blocks))
        return -1;
    if (PyObject_GetBuffer(hi, &r->hi, PyBUF_SIMPLE) < 0)
        return -1;
    if (PyObject_GetBuffer(lo, &r->lo, PyBUF_SIMPLE) < 0)
        return -1;
    if (r->hi.len % 8 || r->lo.len != r->hi.len) {
        PyErr_Format(PyExc_ValueError, "runs_find: hi and lo are u64 arrays of one length, got %zd and %zd bytes",
                     r->hi.len, r->lo.len);
        return -1;
    }
    r->n = r->hi.len / 8;
    r->first = first;
    r->last = last;
    r->blocks = blocks;
    if (filter != Py_None) {
        if (PyObject_GetBuffer(filter, &r->filter, PyBUF_SIMPLE) < 0)
            return -1;
        if (blocks == 0 || blocks > (unsigned long long)PY_SSIZE_T_MAX / RUN_FILTER_BLOCK ||
            r->filter.len != (Py_ssize_t)blocks * RUN_FILTER_BLOCK) {
            PyErr_Format(PyExc_ValueError, "runs_find: a filter of %llu blocks is %llu bytes, got %zd", blocks,
                         blocks * RUN_FILTER_BLOCK, r->filter.len);
            return -1;
        }
    }
    return 0;
}

PyDoc_STRVAR(runs_find_doc,
"runs_find(fps, found, runs) -> int\n\n"
"Look up a batch of fingerprints in sorted runs held in memory. found: a writable buffer of one byte per\n"
"fingerprint; a nonzero entry is not looked up (known already), a zero one is set to 1 if a run holds it. runs:\n"
"a list of tuples (hi, lo, first, last, filter, blocks): the run's fingerprints as two native u64 arrays sorted\n"
"by (hi, lo), the range [first, last] of first halves it may hold, its RunFilter's bytes (or None) and block\n"
"count. Returns how many entries of found are still 0.");

static PyObject *py_runs_find(PyObject *self, PyObject *args)
{
    PyObject *fps_obj, *found_obj, *runs;
    Py_buffer fps, found;
    Py_ssize_t n;
    if (!PyArg_ParseTuple(args, "OOO!:runs_find", &fps_obj, &found_obj, &PyList_Type, &runs) ||
        get_fps(fps_obj, &fps, &n) < 0)
        return NULL;
    if (get_array(found_obj, &found, n, 1, 1, "found") < 0) {
        PyBuffer_Release(&fps);
        return NULL;
    }
    if ((runs = PyList_AsTuple(runs)) == NULL) {  /* owned: getting a buffer may run Python code */
        PyBuffer_Release(&found);
        PyBuffer_Release(&fps);
        return NULL;
    }
    Py_ssize_t nr = PyTuple_GET_SIZE(runs), got = 0, left = -1;
    CachedRun *rs = PyMem_Calloc(nr ? nr : 1, sizeof(CachedRun));
    int ok = rs != NULL;
    if (!ok)
        PyErr_NoMemory();
    for (; ok && got < nr; got++)
        ok = get_cached(PyTuple_GET_ITEM(runs, got), &rs[got]) == 0;
    if (ok) {
        const unsigned char *p = fps.buf;
        unsigned char *out = found.buf;
        PyThreadState *state = release_gil(n);
        /* run by run: one run's arrays and filter stay in cache while the batch passes */
        for (Py_ssize_t k = 0; k < nr; k++) {
            const CachedRun *r = &rs[k];
            if (r->n == 0)
                continue;
            for (Py_ssize_t i = 0; i < n; i++) {
                if (i + WINDOW < n && !out[i + WINDOW])  /* the misses of several probes overlap */
                    prefetch_pairs(r, load_be64(p + (i + WINDOW) * FP));
                if (out[i])
                    continue;
                uint64_t hi = load_be64(p + i * FP), lo = load_be64(p + i * FP + 8);
                if (hi < r->first || hi > r->last || !run_filter_allows(r, hi, lo))
                    continue;
                out[i] = (unsigned char)pairs_hold(r, hi, lo);
            }
        }
        left = 0;
        for (Py_ssize_t i = 0; i < n; i++)
            left += !out[i];
        restore_gil(state);
    }
    for (Py_ssize_t k = 0; k < got; k++)
        release_cached(&rs[k]);
    PyMem_Free(rs);
    Py_DECREF(runs);
    PyBuffer_Release(&found);
    PyBuffer_Release(&fps);
    return ok ? PyLong_FromSsize_t(left) : NULL;
}

static PyMethodDef methods[] = {
    {"switched_off", py_switched_off, METH_NOARGS, switched_off_doc},
    {"join", py_join, METH_O, join_doc},
    {"test", py_test, METH_VARARGS, test_doc},
    {"update", (PyCFunction)(void (*)(void))py_update, METH_VARARGS | METH_KEYWORDS, update_doc},
    {"add", py_add, METH_VARARGS, add_doc},
    {"block_test", py_block_test, METH_VARARGS, block_test_doc},
    {"block_add", py_block_add, METH_VARARGS, block_add_doc},
    {"block_add_urls", py_block_add_urls, METH_VARARGS, block_add_urls_doc},
    {"block_bucket", py_block_bucket, METH_VARARGS, block_bucket_doc},
    {"block_add_buckets", py_block_add_buckets, METH_VARARGS, block_add_buckets_doc},
    {"firsts", py_firsts, METH_VARARGS, firsts_doc},
    {"partition_range", py_partition_range, METH_VARARGS, partition_range_doc},
    {"place", py_place, METH_VARARGS, place_doc},
    {"tally", py_tally, METH_VARARGS, tally_doc},
    {"admit", py_admit, METH_VARARGS, admit_doc},
    {"insert", py_insert, METH_VARARGS, insert_doc},
    {"fingerprints", py_fingerprints, METH_O, fingerprints_doc},
    {"digests", py_digests, METH_O, digests_doc},
    {"select", py_select, METH_VARARGS, select_doc},
    {"set_add", py_set_add, METH_VARARGS, set_add_doc},
    {"set_has", py_set_has, METH_VARARGS, set_has_doc},
    {"set_remove", py_set_remove, METH_VARARGS, set_remove_doc},
    {"set_items", py_set_items, METH_O, set_items_doc},
    {"canonicalize", py_canonicalize, METH_VARARGS, canonicalize_doc},
    {"sort_unique", py_sort_unique, METH_O, sort_unique_doc},
    {"merge_unique", py_merge_unique, METH_O, merge_unique_doc},
    {"chunk_has", py_chunk_has, METH_VARARGS, chunk_has_doc},
    {"runs_find", py_runs_find, METH_VARARGS, runs_find_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "frontier._native",
    "The filters' batch loops, the batch hash and URL canonicalisation in C (see frontier.native).", -1, methods,
};

/* What frontier/native.py expects (its NATIVE_VERSION): a build of older source is not used. Bump it when a
 * function is added or changes. */
#define NATIVE_VERSION 7

PyMODINIT_FUNC PyInit__native(void)
{
    PyObject *m = PyModule_Create(&module);
    if (m != NULL && PyModule_AddIntConstant(m, "VERSION", NATIVE_VERSION) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
