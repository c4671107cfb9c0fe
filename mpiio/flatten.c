/*
 * flatten.c — MPI datatypes and file views as byte runs.
 *
 * A datatype is flattened from its envelope and contents (MPI_Type_get_envelope,
 * MPI_Type_get_contents) into its type map's byte runs (offset, length), in type-map
 * order, adjacent runs merged: named types, dup, contiguous, vector, hvector, indexed,
 * hindexed, indexed_block, hindexed_block, struct, subarray, darray and resized (any
 * combiner not listed is not flattened: the caller passes such calls through).
 * A file view (disp, etype, filetype) places data byte b of the view at
 * disp + (b / size) * extent + the place of (b % size) in the filetype's runs.
 */
#include <stdlib.h>
#include <string.h>

#include "mpiio.h"

#define MAX_RUNS (64u << 20) /* beyond this a type is not flattened */

static int push(flat_t *f, int64_t off, int64_t len)
{
    if (len <= 0)
        return 0;
    if (f->n && f->runs[f->n - 1].off + f->runs[f->n - 1].len == off) {
        f->runs[f->n - 1].len += len;
        return 0;
    }
    if (f->n == f->cap) {
        size_t cap = f->cap ? f->cap * 2 : 16;
        if (cap > MAX_RUNS)
            return -1;
        run_t *r = realloc(f->runs, cap * sizeof *r);
        if (!r)
            return -1;
        f->runs = r;
        f->cap = cap;
    }
    f->runs[f->n++] = (run_t){off, len};
    return 0;
}

/* Appends `reps` copies of child `c` at base, base + step, … */
static int repeat(flat_t *out, const flat_t *c, int64_t base, int64_t reps, int64_t step)
{
    for (int64_t k = 0; k < reps; k++)
        for (size_t i = 0; i < c->n; i++)
            if (push(out, base + k * step + c->runs[i].off, c->runs[i].len))
                return -1;
    return 0;
}

void flat_free(flat_t *f)
{
    free(f->runs);
    memset(f, 0, sizeof *f);
}

static int is_named(MPI_Datatype t)
{
    int ni, na, nd, comb;
    return P(Type_get_envelope)(t, &ni, &na, &nd, &comb) == MPI_SUCCESS &&
           comb == MPI_COMBINER_NAMED;
}

static int flatten_into(MPI_Datatype t, flat_t *out, int64_t base, int depth);

/* Flattens child `t` on its own (runs relative to its origin). */
static int child(MPI_Datatype t, flat_t *c, int depth)
{
    memset(c, 0, sizeof *c);
    MPI_Aint lb, ext;
    if (P(Type_get_extent)(t, &lb, &ext) != MPI_SUCCESS)
        return -1;
    c->lb = lb;
    c->extent = ext;
    if (flatten_into(t, c, 0, depth + 1)) {
        flat_free(c);
        return -1;
    }
    return 0;
}

static int subarray(flat_t *out, const int *ints, const flat_t *c, int64_t base)
{
    int nd = ints[0];
    const int *sizes = ints + 1, *subs = ints + 1 + nd, *starts = ints + 1 + 2 * nd;
    int order = ints[1 + 3 * nd];
    if (nd <= 0 || nd > 64)
        return -1;
    int dim[64];
    int64_t stride[64];
    for (int d = 0; d < nd; d++) /* dim[0] slowest … dim[nd-1] fastest */
        dim[d] = order == MPI_ORDER_C ? d : nd - 1 - d;
    int64_t s = c->extent;
    for (int d = nd - 1; d >= 0; d--) {
        stride[d] = s;
        s *= sizes[dim[d]];
    }
    for (int d = 0; d < nd; d++)
        if (subs[dim[d]] <= 0)
            return 0;
    int idx[64] = {0};
    int last = dim[nd - 1];
    for (;;) {
        int64_t row = base;
        for (int d = 0; d < nd; d++)
            row += (int64_t)(starts[dim[d]] + (d == nd - 1 ? 0 : idx[d])) * stride[d];
        if (repeat(out, c, row, subs[last], c->extent))
            return -1;
        int d = nd - 2;
        while (d >= 0 && ++idx[d] == subs[dim[d]])
            idx[d--] = 0;
        if (d < 0)
            return 0;
    }
}

/* The indices of one darray dimension of `g` elements over `p` processes that process
 * coordinate `c` owns, as (start, length) runs in increasing order (MPI-4.1 §5.1.4):
 * none distributed, one block of `darg` (default ⌈g/p⌉), or blocks of `darg` (default
 * 1) dealt cyclically. The number of runs, or -1. */
static int64_t darray_dim(int g, int dist, int darg, int p, int c, int64_t **runs)
{
    *runs = NULL;
    if (g < 0 || p <= 0 || c < 0 || c >= p)
        return -1;
    int64_t block, step;
    if (dist == MPI_DISTRIBUTE_NONE) {
        block = g;
        step = g > 0 ? g : 1;
        c = 0;
    } else if (dist == MPI_DISTRIBUTE_BLOCK) {
        block = darg == MPI_DISTRIBUTE_DFLT_DARG ? ((int64_t)g + p - 1) / p : darg;
        step = block * p; /* one block per process */
    } else if (dist == MPI_DISTRIBUTE_CYCLIC) {
        block = darg == MPI_DISTRIBUTE_DFLT_DARG ? 1 : darg;
        step = block * p;
    } else {
        return -1;
    }
    if (block <= 0)
        return -1;
    int64_t n = g / step + 2, k = 0;
    if (!(*runs = malloc(sizeof(int64_t) * 2 * (size_t)n)))
        return -1;
    for (int64_t start = (int64_t)c * block; start < g && k < n; start += step) {
        (*runs)[2 * k] = start;
        (*runs)[2 * k + 1] = start + block < g ? block : g - start;
        k++;
        if (dist == MPI_DISTRIBUTE_BLOCK)
            break;
    }
    return k;
}

/* MPI_Type_create_darray's type map: the process's elements of the global array in
 * increasing address order (dimension order by `order`), child `c` per element. */
static int darray(flat_t *out, const int *ints, const flat_t *c, int64_t base)
{
    int size = ints[0], rank = ints[1], nd = ints[2];
    if (nd <= 0 || nd > 64 || size <= 0 || rank < 0 || rank >= size)
        return -1;
    const int *gs = ints + 3, *dist = ints + 3 + nd, *darg = ints + 3 + 2 * nd,
              *ps = ints + 3 + 3 * nd;
    int order = ints[3 + 4 * nd];
    int64_t *runs[64] = {0}, nruns[64], stride[64];
    int dim[64], coord[64], rc = -1;
    for (int d = nd - 1, r = rank; d >= 0; d--) { /* the process grid is row-major */
        coord[d] = r % ps[d];
        r /= ps[d];
    }
    for (int d = 0; d < nd; d++) /* dim[0] slowest in memory … dim[nd-1] fastest */
        dim[d] = order == MPI_ORDER_C ? d : nd - 1 - d;
    int64_t s = c->extent;
    for (int d = nd - 1; d >= 0; d--) {
        stride[d] = s;
        s *= gs[dim[d]];
    }
    for (int d = 0; d < nd; d++) {
        int a = dim[d];
        if ((nruns[d] = darray_dim(gs[a], dist[a], darg[a], ps[a], coord[a], &runs[d])) < 0)
            goto done;
        if (nruns[d] == 0) { /* this process owns nothing */
            rc = 0;
            goto done;
        }
    }
    /* an odometer over the slower dimensions' indices (run, index within it); the
     * fastest dimension's runs are contiguous */
    int64_t run[64] = {0}, idx[64] = {0};
    for (;;) {
        int64_t row = base;
        for (int d = 0; d < nd - 1; d++)
            row += (runs[d][2 * run[d]] + idx[d]) * stride[d];
        for (int64_t k = 0; k < nruns[nd - 1]; k++)
            if (repeat(out, c, row + runs[nd - 1][2 * k] * stride[nd - 1],
                       runs[nd - 1][2 * k + 1], c->extent))
                goto done;
        int d = nd - 2;
        for (; d >= 0; d--) {
            if (++idx[d] < runs[d][2 * run[d] + 1])
                break;
            idx[d] = 0;
            if (++run[d] < nruns[d])
                break;
            run[d] = 0;
        }
        if (d < 0)
            break;
    }
    rc = 0;
done:
    for (int d = 0; d < nd; d++)
        free(runs[d]);
    return rc;
}

static int flatten_into(MPI_Datatype t, flat_t *out, int64_t base, int depth)
{
    int ni, na, nd, comb;
    if (depth > 64 || P(Type_get_envelope)(t, &ni, &na, &nd, &comb) != MPI_SUCCESS)
        return -1;
    if (comb == MPI_COMBINER_NAMED) {
        int size;
        if (P(Type_size)(t, &size) != MPI_SUCCESS)
            return -1;
        return push(out, base, size);
    }
    if (comb == MPI_COMBINER_F90_REAL || comb == MPI_COMBINER_F90_COMPLEX ||
        comb == MPI_COMBINER_F90_INTEGER)
        return -1;
    int *ints = malloc(sizeof(int) * (size_t)(ni + 1));
    MPI_Aint *addrs = malloc(sizeof(MPI_Aint) * (size_t)(na + 1));
    MPI_Datatype *types = malloc(sizeof(MPI_Datatype) * (size_t)(nd + 1));
    int rc = -1;
    flat_t *kids = calloc((size_t)nd + 1, sizeof *kids);
    int nkids = 0, have = 0;
    if (!ints || !addrs || !types || !kids ||
        P(Type_get_contents)(t, ni, na, nd, ints, addrs, types) != MPI_SUCCESS)
        goto done;
    have = 1;
    for (; nkids < nd; nkids++)
        if (child(types[nkids], &kids[nkids], depth))
            goto done;
    const flat_t *c = &kids[0];
    switch (comb) {
    case MPI_COMBINER_DUP:
    case MPI_COMBINER_RESIZED: /* a new lb/extent; the type map is the old type's */
        rc = repeat(out, c, base, 1, 0);
        break;
    case MPI_COMBINER_CONTIGUOUS:
        rc = repeat(out, c, base, ints[0], c->extent);
        break;
    case MPI_COMBINER_VECTOR:
    case MPI_COMBINER_HVECTOR: {
        int64_t stride = comb == MPI_COMBINER_VECTOR ? (int64_t)ints[2] * c->extent : addrs[0];
        rc = 0;
        for (int i = 0; i < ints[0] && !rc; i++)
            rc = repeat(out, c, base + i * stride, ints[1], c->extent);
        break;
    }
    case MPI_COMBINER_INDEXED:
    case MPI_COMBINER_HINDEXED:
    case MPI_COMBINER_INDEXED_BLOCK:
    case MPI_COMBINER_HINDEXED_BLOCK: {
        /* ints: count, then block lengths (one, or one per block), then displacements
         * in child extents (indexed forms); the h-forms give displacements in bytes */
        int n = ints[0], one = comb == MPI_COMBINER_INDEXED_BLOCK ||
                               comb == MPI_COMBINER_HINDEXED_BLOCK;
        int bytes = comb == MPI_COMBINER_HINDEXED || comb == MPI_COMBINER_HINDEXED_BLOCK;
        const int *lens = ints + 1, *displs = ints + 1 + (one ? 1 : n);
        rc = 0;
        for (int i = 0; i < n && !rc; i++) {
            int64_t d = bytes ? addrs[i] : (int64_t)displs[i] * c->extent;
            rc = repeat(out, c, base + d, lens[one ? 0 : i], c->extent);
        }
        break;
    }
    case MPI_COMBINER_STRUCT: {
        int n = ints[0];
        rc = 0;
        for (int i = 0; i < n && !rc; i++)
            rc = repeat(out, &kids[i], base + addrs[i], ints[1 + i], kids[i].extent);
        break;
    }
    case MPI_COMBINER_SUBARRAY:
        rc = subarray(out, ints, c, base);
        break;
    case MPI_COMBINER_DARRAY:
        rc = darray(out, ints, c, base);
        break;
    default:
        rc = -1;
    }
done:
    for (int i = 0; i < nkids; i++)
        flat_free(&kids[i]);
    if (have) /* derived types handed out by get_contents are the caller's to free */
        for (int i = 0; i < nd; i++)
            if (!is_named(types[i]))
                P(Type_free)(&types[i]);
    free(kids);
    free(ints);
    free(addrs);
    free(types);
    return rc;
}

int flat_type(MPI_Datatype t, flat_t *out)
{
    memset(out, 0, sizeof *out);
    MPI_Aint lb, ext;
    MPI_Count size;
    if (P(Type_get_extent)(t, &lb, &ext) != MPI_SUCCESS ||
        P(Type_size_x)(t, &size) != MPI_SUCCESS)
        return -1;
    out->lb = lb;
    out->extent = ext;
    out->size = size;
    if (flatten_into(t, out, 0, 0)) {
        flat_free(out);
        return -1;
    }
    return 0;
}

int flat_contiguous(const flat_t *f, int64_t count)
{
    if (f->size == 0 || count <= 1)
        return f->n <= 1;
    return f->n == 1 && f->runs[0].len == f->extent;
}

void flat_scatter(const flat_t *f, const void *src, uint64_t n, void *dst)
{
    const char *from = src;
    for (int64_t k = 0; n; k++)
        for (size_t i = 0; i < f->n && n; i++) {
            uint64_t len = (uint64_t)f->runs[i].len < n ? (uint64_t)f->runs[i].len : n;
            memcpy((char *)dst + k * f->extent + f->runs[i].off, from, len);
            from += len;
            n -= len;
        }
}

void view_free(view_t *v)
{
    flat_free(&v->ft);
    free(v->prefix);
    memset(v, 0, sizeof *v);
}

void view_default(view_t *v)
{
    memset(v, 0, sizeof *v);
    v->etype_size = 1;
    v->identity = 1;
}

int view_set(view_t *v, MPI_Offset disp, MPI_Datatype etype, MPI_Datatype filetype)
{
    view_t n;
    memset(&n, 0, sizeof n);
    int es;
    if (P(Type_size)(etype, &es) != MPI_SUCCESS || es <= 0 || flat_type(filetype, &n.ft))
        return -1;
    n.disp = disp;
    n.etype_size = es;
    if (n.ft.size <= 0 || n.ft.extent <= 0) {
        flat_free(&n.ft);
        return -1;
    }
    n.identity = n.ft.n == 1 && n.ft.runs[0].off == 0 && n.ft.runs[0].len == n.ft.extent;
    n.prefix = malloc(sizeof(int64_t) * (n.ft.n + 1));
    if (!n.prefix) {
        flat_free(&n.ft);
        return -1;
    }
    int64_t s = 0;
    for (size_t i = 0; i < n.ft.n; i++) {
        n.prefix[i] = s;
        s += n.ft.runs[i].len;
    }
    n.prefix[n.ft.n] = s;
    view_free(v);
    *v = n;
    return 0;
}

void extents_free(extents_t *e)
{
    free(e->v);
    memset(e, 0, sizeof *e);
}

static int ext_push(extents_t *e, uint64_t off, uint64_t len)
{
    if (!len)
        return 0;
    if (e->n && e->v[2 * e->n - 2] + e->v[2 * e->n - 1] == off) {
        e->v[2 * e->n - 1] += len;
    } else {
        if (e->n == e->cap) {
            size_t cap = e->cap ? e->cap * 2 : 16;
            uint64_t *p = realloc(e->v, cap * 2 * sizeof *p);
            if (!p)
                return -1;
            e->v = p;
            e->cap = cap;
        }
        e->v[2 * e->n] = off;
        e->v[2 * e->n + 1] = len;
        e->n++;
    }
    e->bytes += len;
    return 0;
}

int view_extents(const view_t *v, uint64_t b, uint64_t n, extents_t *out)
{
    out->n = 0;
    out->bytes = 0;
    if (v->identity || !v->ft.n)
        return ext_push(out, (uint64_t)v->disp + b, n);
    uint64_t size = (uint64_t)v->ft.size, ext = (uint64_t)v->ft.extent;
    uint64_t tile = b / size, r = b % size;
    /* the run holding data byte r of a tile */
    size_t lo = 0, hi = v->ft.n - 1;
    while (lo < hi) {
        size_t mid = (lo + hi + 1) / 2;
        if ((uint64_t)v->prefix[mid] <= r)
            lo = mid;
        else
            hi = mid - 1;
    }
    size_t i = lo;
    uint64_t within = r - (uint64_t)v->prefix[i];
    while (n) {
        const run_t *run = &v->ft.runs[i];
        uint64_t take = (uint64_t)run->len - within;
        if (take > n)
            take = n;
        if (ext_push(out, (uint64_t)v->disp + tile * ext + (uint64_t)run->off + within, take))
            return -1;
        n -= take;
        within = 0;
        if (++i == v->ft.n) {
            i = 0;
            tile++;
        }
    }
    return 0;
}

uint64_t view_bytes_before(const view_t *v, uint64_t end)
{
    if (end <= (uint64_t)v->disp)
        return 0;
    uint64_t rel = end - (uint64_t)v->disp;
    if (v->identity || !v->ft.n)
        return rel;
    uint64_t ext = (uint64_t)v->ft.extent, tiles = rel / ext, r = rel % ext;
    uint64_t bytes = tiles * (uint64_t)v->ft.size;
    for (size_t i = 0; i < v->ft.n; i++) {
        int64_t o = v->ft.runs[i].off, l = v->ft.runs[i].len;
        if ((int64_t)r > o)
            bytes += (uint64_t)((int64_t)r - o < l ? (int64_t)r - o : l);
    }
    return bytes;
}
