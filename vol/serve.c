/* serve.c - serving the connector's dataset reads from layout replicas.
 *
 * For each dataset of a file with a knowledge base, at its first read, the layout core
 * (patio_serve_*) lists the dataset's ready replicas and checks them as patio.h5 does;
 * this file reads where each replica's bytes are (its layout, through the native
 * connector: contiguous offset or chunk addresses and stored sizes) and where the
 * original's are, and gets the core's decider over them. A read whose plan uses a
 * replica is carried out piece by piece - each piece's selection read from its copy
 * (replica files opened lazily through the native connector and kept open until the
 * source file closes) into a dense buffer, then placed into the caller's buffer in the
 * plan's axis order - and counted for the replica (served_reads). Everything else, and
 * any read that fails midway (the replica is then marked damaged and never used again),
 * is read from the original by the caller, so a read always delivers the original's
 * bytes.
 *
 * Served: reads of integer or float datasets whose memory buffer is dense in selection
 * order (H5S_ALL with the whole dataset, H5S_BLOCK, or a memory space whose selection
 * is "all" with as many elements as the file selection) - what h5py, netCDF and most C
 * readers issue. PATIO_LAYOUT_SERVE=off records without serving.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "patio_layout.h"
#include "vol.h"

#define MAX_RANK 32

_Static_assert(sizeof(hsize_t) == sizeof(uint64_t), "hsize_t is 64-bit");

static struct {
    int on;
    const char *(*last_error)(void);
    int (*open)(const char *, const char *, PatioServe **);
    int (*replica)(const PatioServe *, uint64_t, uint64_t *, const char **);
    int (*set_layout)(PatioServe *, uint64_t, const PatioLayout *);
    int (*ready)(PatioServe *, const PatioLayout *, PatioDecider **, uint64_t *);
    int (*note)(const PatioServe *, uint64_t, const char **);
    int (*copy)(const PatioServe *, int64_t, uint64_t *);
    int (*current)(const PatioServe *, int *);
    int (*used)(PatioServe *, uint64_t, double);
    int (*damaged)(PatioServe *, uint64_t, const char *);
    int (*close)(PatioServe *);
    int (*written)(const char *, const char *);
    int (*contiguous)(uint32_t, const uint64_t *, uint64_t, uint64_t, PatioLayout **);
    int (*chunked)(uint32_t, const uint64_t *, uint64_t, const uint64_t *, uint64_t,
                   const int64_t *, const uint64_t *, PatioLayout **);
    int (*chunk_cache)(PatioLayout *, uint64_t);
    void (*layout_free)(PatioLayout *);
    int (*plan)(PatioDecider *, uint32_t, uint64_t, const uint64_t *, PatioPlan **);
    int (*plan_points)(PatioDecider *, uint32_t, uint64_t, const uint64_t *, PatioPlan **);
    int (*summary)(const PatioPlan *, int32_t *, double *, double *, uint64_t *);
    int (*buffer)(const PatioPlan *, uint64_t *, uint64_t, uint64_t *);
    int (*piece)(const PatioPlan *, uint64_t, int64_t *, uint32_t *, uint64_t, uint64_t *);
    int (*selection)(const PatioPlan *, uint64_t, int32_t, int32_t *, uint32_t *, uint64_t *);
    int (*axis)(const PatioPlan *, uint64_t, int32_t, uint64_t, uint32_t, uint64_t *, uint64_t,
                uint64_t *);
    int (*coords)(const PatioPlan *, uint64_t, int32_t, uint64_t *, uint64_t, uint64_t *);
    void (*plan_free)(PatioPlan *);
} C;

/* A replica file and its dataset "data", opened through the native connector (dset:
 * the native connector's object of dset_id). */
typedef struct {
    hid_t file_id, dset_id;
    void *dset;
    int rank;
    hsize_t dims[MAX_RANK];
} replica;

/* One dataset of one file: its replicas and decider (serve NULL: nothing to serve). */
typedef struct {
    char *file, *dset;
    PatioServe *serve;
    PatioDecider *decider;
    replica *reps;
    uint64_t nreps;
} entry;

static entry *entries;
static size_t nentries;
static hid_t native = H5I_INVALID_HID;

/* The files opened, by name as opened and resolved against the directory current then
 * (a program may change directory before it reads). */
typedef struct {
    char *name, *path;
} opened;
static opened *files;
static size_t nfiles;

#define SYM(field, name)                                                                      \
    do {                                                                                      \
        *(void **)&C.field = dlsym(lib, name);                                                \
        if (!C.field)                                                                         \
            return;                                                                           \
    } while (0)

void pv_serve_init(void *lib)
{
    const char *off = getenv("PATIO_LAYOUT_SERVE");
    if (!lib || (off && (!strcmp(off, "0") || !strcasecmp(off, "off") || !strcasecmp(off, "no"))))
        return;
    SYM(last_error, "patio_layout_last_error");
    SYM(open, "patio_serve_open");
    SYM(replica, "patio_serve_replica");
    SYM(set_layout, "patio_serve_set_layout");
    SYM(ready, "patio_serve_ready");
    SYM(note, "patio_serve_note");
    SYM(copy, "patio_serve_copy");
    SYM(current, "patio_serve_current");
    SYM(used, "patio_serve_used");
    SYM(damaged, "patio_serve_damaged");
    SYM(close, "patio_serve_close");
    SYM(written, "patio_serve_written");
    SYM(contiguous, "patio_layout_contiguous");
    SYM(chunked, "patio_layout_chunked");
    SYM(chunk_cache, "patio_layout_set_chunk_cache");
    SYM(layout_free, "patio_layout_free");
    SYM(plan, "patio_decider_plan");
    SYM(plan_points, "patio_decider_plan_points");
    SYM(summary, "patio_plan_summary");
    SYM(buffer, "patio_plan_buffer");
    SYM(piece, "patio_plan_piece");
    SYM(selection, "patio_plan_selection");
    SYM(axis, "patio_plan_axis");
    SYM(coords, "patio_plan_coords");
    SYM(plan_free, "patio_plan_free");
    native = H5VLregister_connector_by_value(H5_VOL_NATIVE, H5P_DEFAULT);
    C.on = native >= 0;
}

/* ---- layouts ---------------------------------------------------------------------- */

static herr_t native_optional(void *obj, hid_t vol, int op, H5VL_native_dataset_optional_args_t *a)
{
    H5VL_optional_args_t args = {.op_type = op, .args = a};
    return H5VLdataset_optional(obj, vol, &args, H5P_DATASET_XFER_DEFAULT, NULL);
}

typedef struct {
    int rank;
    const hsize_t *chunk, *grid;
    int64_t *addr;
    uint64_t *stored;
    uint64_t cells;
    int bad;
} chunk_walk;

static int visit_chunk(const hsize_t *offset, unsigned mask, haddr_t addr, hsize_t size, void *op)
{
    (void)mask;
    chunk_walk *w = op;
    uint64_t cell = 0;
    for (int a = 0; a < w->rank; a++) {
        hsize_t i = offset[a] / w->chunk[a];
        if (offset[a] % w->chunk[a] || i >= w->grid[a]) {
            w->bad = 1;
            return H5_ITER_STOP;
        }
        cell = cell * w->grid[a] + i;
    }
    if (addr == HADDR_UNDEF || cell >= w->cells) {
        w->bad = 1;
        return H5_ITER_STOP;
    }
    w->addr[cell] = (int64_t)addr;
    if (w->stored)
        w->stored[cell] = size;
    return H5_ITER_CONT;
}

/* The layout of a dataset object of connector `vol`, with its dims (NULL: not located). */
static PatioLayout *layout_of(void *obj, hid_t vol, int *rank_out, hsize_t *dims)
{
    PatioLayout *out = NULL;
    H5VL_dataset_get_args_t sp = {.op_type = H5VL_DATASET_GET_SPACE};
    H5VL_dataset_get_args_t ty = {.op_type = H5VL_DATASET_GET_TYPE};
    H5VL_dataset_get_args_t pl = {.op_type = H5VL_DATASET_GET_DCPL};
    sp.args.get_space.space_id = ty.args.get_type.type_id = pl.args.get_dcpl.dcpl_id = -1;
    if (H5VLdataset_get(obj, vol, &sp, H5P_DATASET_XFER_DEFAULT, NULL) < 0 ||
        H5VLdataset_get(obj, vol, &ty, H5P_DATASET_XFER_DEFAULT, NULL) < 0 ||
        H5VLdataset_get(obj, vol, &pl, H5P_DATASET_XFER_DEFAULT, NULL) < 0)
        goto done;
    int rank = H5Sget_simple_extent_ndims(sp.args.get_space.space_id);
    size_t item = H5Tget_size(ty.args.get_type.type_id);
    if (rank <= 0 || rank > MAX_RANK || !item ||
        H5Sget_simple_extent_dims(sp.args.get_space.space_id, dims, NULL) != rank)
        goto done;
    *rank_out = rank;
    hid_t dcpl = pl.args.get_dcpl.dcpl_id;
    H5D_layout_t kind = H5Pget_layout(dcpl);
    if (kind == H5D_CONTIGUOUS) {
        haddr_t off = HADDR_UNDEF;
        H5VL_native_dataset_optional_args_t a = {.get_offset = {&off}};
        if (native_optional(obj, vol, H5VL_NATIVE_DATASET_GET_OFFSET, &a) < 0)
            goto done;
        if (off == HADDR_UNDEF) /* nothing written yet: nothing to read either */
            off = 0;
        C.contiguous((uint32_t)rank, dims, item, off, &out);
    } else if (kind == H5D_CHUNKED) {
        hsize_t chunk[MAX_RANK], grid[MAX_RANK];
        if (H5Pget_chunk(dcpl, rank, chunk) != rank)
            goto done;
        uint64_t cells = 1;
        for (int a = 0; a < rank; a++) {
            grid[a] = chunk[a] ? (dims[a] + chunk[a] - 1) / chunk[a] : 0;
            cells *= grid[a];
        }
        int filtered = H5Pget_nfilters(dcpl) > 0;
        chunk_walk w = {rank, chunk, grid, malloc((cells ? cells : 1) * sizeof(int64_t)),
                        filtered ? calloc(cells ? cells : 1, sizeof(uint64_t)) : NULL, cells, 0};
        if (w.addr && (!filtered || w.stored)) {
            for (uint64_t i = 0; i < cells; i++)
                w.addr[i] = -1;
            H5VL_native_dataset_optional_args_t a = {.chunk_iter = {visit_chunk, &w}};
            if (native_optional(obj, vol, H5VL_NATIVE_DATASET_CHUNK_ITER, &a) >= 0 && !w.bad)
                C.chunked((uint32_t)rank, dims, item, chunk, cells, w.addr, w.stored, &out);
        }
        free(w.addr);
        free(w.stored);
        /* The chunk cache the dataset is read with: HDF5 reads an unfiltered chunk that
         * fits it whole. */
        H5VL_dataset_get_args_t ap = {.op_type = H5VL_DATASET_GET_DAPL};
        ap.args.get_dapl.dapl_id = -1;
        size_t slots = 0, nbytes = 0;
        double w0 = 0;
        if (out && H5VLdataset_get(obj, vol, &ap, H5P_DATASET_XFER_DEFAULT, NULL) >= 0) {
            if (H5Pget_chunk_cache(ap.args.get_dapl.dapl_id, &slots, &nbytes, &w0) >= 0)
                C.chunk_cache(out, (uint64_t)nbytes);
            H5Pclose(ap.args.get_dapl.dapl_id);
        }
    }
done:
    H5E_BEGIN_TRY
    {
        H5Sclose(sp.args.get_space.space_id);
        H5Tclose(ty.args.get_type.type_id);
        H5Pclose(pl.args.get_dcpl.dcpl_id);
    }
    H5E_END_TRY
    return out;
}

/* ---- entries ---------------------------------------------------------------------- */

static void replica_close(replica *r)
{
    if (r->dset_id > 0)
        H5Dclose(r->dset_id);
    if (r->file_id > 0)
        H5Fclose(r->file_id);
    r->dset_id = r->file_id = H5I_INVALID_HID;
    r->dset = NULL;
}

static void entry_drop(entry *e)
{
    for (uint64_t i = 0; i < e->nreps; i++)
        replica_close(&e->reps[i]);
    free(e->reps);
    if (e->serve && C.close(e->serve) != PATIO_OK)
        pv_warn("%s: reads served from replicas not counted: %s", e->file, C.last_error());
    e->reps = NULL;
    e->nreps = 0;
    e->serve = NULL;
    e->decider = NULL;
}

/* Opens replica i's file and dataset through the native connector (0: cannot). */
static int replica_open(entry *e, uint64_t i, const char *path)
{
    replica *r = &e->reps[i];
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    if (fapl < 0)
        return 0;
    if (H5Pset_vol(fapl, native, NULL) >= 0)
        r->file_id = H5Fopen(path, H5F_ACC_RDONLY, fapl);
    H5Pclose(fapl);
    if (r->file_id <= 0)
        return 0;
    r->dset_id = H5Dopen2(r->file_id, "data", H5P_DEFAULT);
    r->dset = r->dset_id > 0 ? H5VLobject(r->dset_id) : NULL;
    return r->dset != NULL;
}

/* One line per replica the core left out (missing, damaged, stale). */
static void warn_notes(entry *e)
{
    const char *line = NULL;
    for (uint64_t k = 0; C.note(e->serve, k, &line) == PATIO_OK && line; k++)
        pv_warn("%s: %s", e->file, line);
}

/* Makes e's decider: every replica opened and located, the original located. */
static void entry_ready(entry *e, pv_obj *o)
{
    uint64_t n = 0;
    const char *path = NULL;
    if (C.replica(e->serve, 0, &n, &path) != PATIO_OK || n == 0 ||
        !(e->reps = calloc(n, sizeof *e->reps))) {
        warn_notes(e);
        entry_drop(e);
        return;
    }
    for (uint64_t i = 0; i < n; i++)
        e->reps[i].file_id = e->reps[i].dset_id = H5I_INVALID_HID;
    e->nreps = n;
    for (uint64_t i = 0; i < n; i++) {
        if (C.replica(e->serve, i, &n, &path) != PATIO_OK || !path || !replica_open(e, i, path))
            continue;
        PatioLayout *l = layout_of(e->reps[i].dset, native, &e->reps[i].rank, e->reps[i].dims);
        if (l) {
            C.set_layout(e->serve, i, l);
            C.layout_free(l);
        }
    }
    int rank = 0;
    hsize_t dims[MAX_RANK];
    PatioLayout *orig = layout_of(o->under_object, o->under_vol_id, &rank, dims);
    uint64_t nnotes = 0;
    if (!orig || C.ready(e->serve, orig, &e->decider, &nnotes) != PATIO_OK) {
        if (orig)
            pv_warn("%s%s: replicas not used: %s", e->file, e->dset, C.last_error());
        C.layout_free(orig);
        entry_drop(e);
        return;
    }
    C.layout_free(orig);
    warn_notes(e);
}

void pv_serve_file_opened(const char *name)
{
    if (!C.on)
        return;
    for (size_t i = 0; i < nfiles; i++)
        if (!strcmp(files[i].name, name))
            return;
    char *path = realpath(name, NULL);
    opened *grown = path ? realloc(files, (nfiles + 1) * sizeof *files) : NULL;
    char *copy = grown ? strdup(name) : NULL;
    if (grown)
        files = grown;
    if (!copy) {
        free(path);
        return;
    }
    files[nfiles++] = (opened){copy, path};
}

/* The path `name` was opened at (itself when unknown). */
static const char *resolved(const char *name)
{
    for (size_t i = 0; i < nfiles; i++)
        if (!strcmp(files[i].name, name))
            return files[i].path;
    return name;
}

static entry *entry_for(pv_obj *o)
{
    const char *file = NULL, *dset = NULL;
    if (!pv_dataset_names(o, &file, &dset))
        return NULL;
    file = resolved(file);
    entry *e = NULL;
    for (size_t i = 0; i < nentries && !e; i++)
        if (!strcmp(entries[i].file, file) && !strcmp(entries[i].dset, dset))
            e = &entries[i];
    if (!e) {
        entry *grown = realloc(entries, (nentries + 1) * sizeof *entries);
        if (!grown)
            return NULL;
        entries = grown;
        e = &entries[nentries];
        memset(e, 0, sizeof *e);
        e->file = strdup(file);
        e->dset = strdup(dset);
        if (!e->file || !e->dset) {
            free(e->file);
            free(e->dset);
            return NULL;
        }
        nentries++;
    } else if (e->serve) {
        int current = 0;
        if (C.current(e->serve, &current) == PATIO_OK && current)
            return e;
        entry_drop(e); /* the source changed: its replicas are checked anew */
    } else {
        return e;
    }
    if (C.open(file, dset, &e->serve) != PATIO_OK) {
        pv_warn("%s%s: replicas not used: %s", file, dset, C.last_error());
        e->serve = NULL;
    }
    if (e->serve)
        entry_ready(e, o);
    return e;
}

void pv_serve_file_closed(const char *name)
{
    const char *path = resolved(name);
    for (size_t i = 0; i < nentries;) {
        if (strcmp(entries[i].file, path)) {
            i++;
            continue;
        }
        entry_drop(&entries[i]);
        free(entries[i].file);
        free(entries[i].dset);
        entries[i] = entries[--nentries];
    }
    for (size_t i = 0; i < nfiles; i++) {
        if (!strcmp(files[i].name, name)) {
            free(files[i].name);
            free(files[i].path);
            files[i] = files[--nfiles];
            break;
        }
    }
}

void pv_serve_term(void)
{
    while (nentries) {
        entry *e = &entries[nentries - 1];
        entry_drop(e);
        free(e->file);
        free(e->dset);
        nentries--;
    }
    free(entries);
    entries = NULL;
    while (nfiles) {
        nfiles--;
        free(files[nfiles].name);
        free(files[nfiles].path);
    }
    free(files);
    files = NULL;
}

void pv_serve_written(pv_obj *o)
{
    const char *file = NULL, *dset = NULL;
    if (!C.on || !pv_dataset_names(o, &file, &dset))
        return;
    file = resolved(file);
    for (size_t i = 0; i < nentries; i++)
        if (!strcmp(entries[i].file, file) && !strcmp(entries[i].dset, dset))
            entry_drop(&entries[i]); /* opened anew (and found stale) at the next read */
    if (C.written(file, dset) != PATIO_OK)
        pv_warn("%s%s: replicas not marked stale: %s", file, dset, C.last_error());
}

/* ---- carrying out a plan ---------------------------------------------------------- */

/* Per-axis blocks of grid g of side `which` of piece i (malloc'd pairs; NULL: failed). */
static uint64_t *axis_blocks(const PatioPlan *p, uint64_t i, int32_t which, uint64_t g,
                             uint32_t a, uint64_t *n)
{
    uint64_t need = 0;
    int rc = C.axis(p, i, which, g, a, NULL, 0, &need);
    if (rc != PATIO_OK && rc != PATIO_ERANGE)
        return NULL;
    uint64_t *b = malloc((need ? need : 1) * 2 * sizeof *b);
    if (b && C.axis(p, i, which, g, a, b, need, n) != PATIO_OK) {
        free(b);
        return NULL;
    }
    return b;
}

/* Selects grid g of side `which` of piece i in `space` (the copy's dataspace); its
 * number of indices per axis into lens[rank]. */
static int select_grid(hid_t space, const PatioPlan *p, uint64_t i, int32_t which, uint64_t g,
                       uint32_t rank, hsize_t *lens)
{
    uint64_t *blocks[MAX_RANK] = {0}, nb[MAX_RANK], at[MAX_RANK] = {0};
    int ok = 1;
    for (uint32_t a = 0; a < rank && ok; a++)
        ok = (blocks[a] = axis_blocks(p, i, which, g, a, &nb[a])) != NULL && nb[a] > 0;
    for (uint32_t a = 0; a < rank && ok; a++) {
        lens[a] = 0;
        for (uint64_t k = 0; k < nb[a]; k++)
            lens[a] += blocks[a][2 * k + 1];
    }
    /* Each axis regular (equal blocks, equal spacing): one hyperslab. */
    int regular = ok;
    hsize_t start[MAX_RANK], stride[MAX_RANK], count[MAX_RANK], block[MAX_RANK];
    for (uint32_t a = 0; a < rank && regular; a++) {
        start[a] = blocks[a][0];
        block[a] = blocks[a][1];
        count[a] = nb[a];
        stride[a] = nb[a] > 1 ? blocks[a][2] - blocks[a][0] : 1;
        for (uint64_t k = 1; k < nb[a] && regular; k++)
            regular = blocks[a][2 * k + 1] == block[a] &&
                      blocks[a][2 * k] - blocks[a][2 * k - 2] == stride[a];
    }
    if (regular) {
        ok = H5Sselect_hyperslab(space, H5S_SELECT_SET, start, stride, count, block) >= 0;
    } else if (ok) {
        /* Otherwise the product of the blocks, box by box. */
        H5S_seloper_t op = H5S_SELECT_SET;
        for (int more = 1; more && ok;) {
            for (uint32_t a = 0; a < rank; a++) {
                start[a] = blocks[a][2 * at[a]];
                block[a] = blocks[a][2 * at[a] + 1];
                count[a] = 1;
            }
            ok = H5Sselect_hyperslab(space, op, start, NULL, count, block) >= 0;
            op = H5S_SELECT_OR;
            more = 0;
            for (int a = (int)rank - 1; a >= 0 && !more; a--) {
                if (++at[a] < nb[a])
                    more = 1;
                else
                    at[a] = 0;
            }
        }
    }
    for (uint32_t a = 0; a < rank; a++)
        free(blocks[a]);
    return ok;
}

/* Places the dense elements `src` into `buf` (shape bdims, row-major) at the elements of
 * grid g of piece i's destination, iterated with buffer axis order[0] outermost. */
typedef struct {
    const char *src;
    char *buf;
    size_t item;
    uint32_t rank;
    const uint32_t *order;
    hsize_t stride[MAX_RANK];
    uint64_t *blocks[MAX_RANK], nb[MAX_RANK];
} placing;

static void place(placing *w, uint32_t level, uint64_t base)
{
    uint32_t a = w->order[level];
    for (uint64_t k = 0; k < w->nb[a]; k++) {
        uint64_t lo = w->blocks[a][2 * k], len = w->blocks[a][2 * k + 1];
        if (level + 1 == w->rank) {
            if (w->stride[a] == 1) {
                memcpy(w->buf + (base + lo) * w->item, w->src, len * w->item);
                w->src += len * w->item;
            } else {
                for (uint64_t j = lo; j < lo + len; j++) {
                    memcpy(w->buf + (base + j * w->stride[a]) * w->item, w->src, w->item);
                    w->src += w->item;
                }
            }
        } else {
            for (uint64_t j = lo; j < lo + len; j++)
                place(w, level + 1, base + j * w->stride[a]);
        }
    }
}

/* Reads piece i of the plan into buf; the replica it read, or -1 (the original); -2 on
 * failure. */
static int64_t run_piece(entry *e, pv_obj *o, const PatioPlan *p, uint64_t i, hid_t mem_type,
                         hid_t dxpl, int brank, const hsize_t *bdims, void *buf, size_t item)
{
    int64_t copy = -1;
    uint32_t order[MAX_RANK];
    uint64_t n = 0, rep = 0;
    if (C.piece(p, i, &copy, order, MAX_RANK, &n) != PATIO_OK || n != (uint64_t)brank)
        return -2;
    void *obj = o->under_object;
    hid_t vol = o->under_vol_id;
    int rank = 0;
    hsize_t dims[MAX_RANK];
    if (copy >= 0) {
        if (C.copy(e->serve, copy, &rep) != PATIO_OK || rep >= e->nreps || !e->reps[rep].dset)
            return -2;
        obj = e->reps[rep].dset;
        vol = native;
        rank = e->reps[rep].rank;
        memcpy(dims, e->reps[rep].dims, sizeof dims);
    } else {
        H5VL_dataset_get_args_t sp = {.op_type = H5VL_DATASET_GET_SPACE};
        if (H5VLdataset_get(obj, vol, &sp, H5P_DATASET_XFER_DEFAULT, NULL) < 0)
            return -2;
        rank = H5Sget_simple_extent_ndims(sp.args.get_space.space_id);
        H5Sget_simple_extent_dims(sp.args.get_space.space_id, dims, NULL);
        H5Sclose(sp.args.get_space.space_id);
    }
    int32_t skind = 0, dkind = 0;
    uint32_t srank = 0, drank = 0;
    uint64_t scount = 0, dcount = 0;
    if (C.selection(p, i, PATIO_SOURCE, &skind, &srank, &scount) != PATIO_OK ||
        C.selection(p, i, PATIO_DEST, &dkind, &drank, &dcount) != PATIO_OK ||
        srank != (uint32_t)rank || drank != (uint32_t)brank)
        return -2;
    hid_t space = H5Screate_simple(rank, dims, NULL);
    if (space < 0)
        return -2;
    /* The source, grid by grid (each read in row-major order), into one dense buffer. */
    char *dense = NULL;
    size_t have = 0;
    int ok = 1;
    uint64_t ngrids = skind == PATIO_SEL_GRIDS ? scount : 1;
    for (uint64_t g = 0; g < ngrids && ok; g++) {
        /* The dense buffer shaped as the grid (its indices per axis), so that HDF5 maps
         * it to the copy's chunks by hyperslabs, not element by element. */
        hsize_t lens[MAX_RANK];
        int mrank = 1;
        if (skind == PATIO_SEL_GRIDS) {
            ok = select_grid(space, p, i, PATIO_SOURCE, g, srank, lens);
            mrank = (int)srank;
        } else {
            uint64_t *pts = malloc((scount ? scount : 1) * srank * sizeof *pts), got = 0;
            ok = pts && C.coords(p, i, PATIO_SOURCE, pts, scount, &got) == PATIO_OK &&
                 H5Sselect_elements(space, H5S_SELECT_SET, got, pts) >= 0;
            free(pts);
        }
        hssize_t k = ok ? H5Sget_select_npoints(space) : -1;
        char *grown = k > 0 ? realloc(dense, have + (size_t)k * item) : NULL;
        ok = grown != NULL;
        if (ok) {
            dense = grown;
            if (mrank == 1)
                lens[0] = (hsize_t)k;
            hid_t mem = H5Screate_simple(mrank, lens, NULL);
            void *dst = dense + have;
            ok = mem >= 0 && H5VLdataset_read(1, &obj, vol, &mem_type, &mem, &space, dxpl, &dst,
                                              NULL) >= 0;
            if (mem >= 0)
                H5Sclose(mem);
            have += (size_t)k * item;
        }
    }
    H5Sclose(space);
    /* Into the caller's buffer at the destination's elements. */
    if (ok && dkind == PATIO_SEL_GRIDS) {
        const char *src = dense;
        for (uint64_t g = 0; g < dcount && ok; g++) {
            placing w = {.src = src, .buf = buf, .item = item, .rank = drank, .order = order};
            hsize_t s = 1;
            for (int a = brank - 1; a >= 0; a--) {
                w.stride[a] = s;
                s *= bdims[a];
            }
            for (uint32_t a = 0; a < drank && ok; a++)
                ok = (w.blocks[a] = axis_blocks(p, i, PATIO_DEST, g, a, &w.nb[a])) != NULL;
            uint64_t need = 1;
            for (uint32_t a = 0; a < drank && ok; a++) {
                uint64_t len = 0;
                for (uint64_t k = 0; k < w.nb[a]; k++)
                    len += w.blocks[a][2 * k + 1];
                need *= len;
            }
            ok = ok && (size_t)(src - dense) + need * item <= have;
            if (ok && need)
                place(&w, 0, 0);
            src = w.src;
            for (uint32_t a = 0; a < drank; a++)
                free(w.blocks[a]);
        }
    } else if (ok) {
        uint64_t *pos = malloc((dcount ? dcount : 1) * sizeof *pos), got = 0;
        ok = pos && C.coords(p, i, PATIO_DEST, pos, dcount, &got) == PATIO_OK &&
             got * item <= have;
        for (uint64_t j = 0; ok && j < got; j++)
            memcpy((char *)buf + pos[j] * item, dense + j * item, item);
        free(pos);
    }
    free(dense);
    if (!ok)
        return -2;
    return copy >= 0 ? (int64_t)rep : -1;
}

/* The file selection as hyperslabs for the decider ((start, stride, count, block) per
 * slab; malloc'd), or as points (kind 1). */
static uint64_t *request(hid_t space, int rank, const hsize_t *dims, int *points, uint64_t *n)
{
    uint64_t *v = NULL;
    *points = 0;
    switch (H5Sget_select_type(space)) {
    case H5S_SEL_ALL:
        if (!(v = malloc(4 * (size_t)rank * sizeof *v)))
            return NULL;
        for (int a = 0; a < rank; a++) {
            v[a] = 0;
            v[rank + a] = 1;
            v[2 * rank + a] = 1;
            v[3 * rank + a] = dims[a];
        }
        *n = 1;
        return v;
    case H5S_SEL_POINTS: {
        hssize_t k = H5Sget_select_elem_npoints(space);
        if (k <= 0 || !(v = malloc((size_t)k * (size_t)rank * sizeof *v)))
            return NULL;
        *points = 1;
        *n = (uint64_t)k;
        if (H5Sget_select_elem_pointlist(space, 0, (hsize_t)k, v) < 0) {
            free(v);
            return NULL;
        }
        return v;
    }
    case H5S_SEL_HYPERSLABS:
        if (H5Sis_regular_hyperslab(space) > 0) {
            if (!(v = malloc(4 * (size_t)rank * sizeof *v)))
                return NULL;
            *n = 1;
            if (H5Sget_regular_hyperslab(space, v, v + rank, v + 2 * rank, v + 3 * rank) < 0) {
                free(v);
                return NULL;
            }
            return v;
        } else {
            hssize_t k = H5Sget_select_hyper_nblocks(space);
            uint64_t *corners = k > 0 ? malloc((size_t)k * 2 * (size_t)rank * sizeof *v) : NULL;
            v = k > 0 ? malloc((size_t)k * 4 * (size_t)rank * sizeof *v) : NULL;
            if (!corners || !v ||
                H5Sget_select_hyper_blocklist(space, 0, (hsize_t)k, corners) < 0) {
                free(corners);
                free(v);
                return NULL;
            }
            for (hssize_t b = 0; b < k; b++) {
                const uint64_t *lo = corners + 2 * rank * b, *hi = lo + rank;
                uint64_t *s = v + 4 * rank * b;
                for (int a = 0; a < rank; a++) {
                    s[a] = lo[a];
                    s[rank + a] = 1;
                    s[2 * rank + a] = 1;
                    s[3 * rank + a] = hi[a] - lo[a] + 1;
                }
            }
            free(corners);
            *n = (uint64_t)k;
            return v;
        }
    default:
        return NULL;
    }
}

/* 1 when the memory buffer holds the selection's elements densely, in selection order. */
static int dense_memory(hid_t mem_space, hid_t file_space, hssize_t npoints)
{
    if (mem_space == H5S_BLOCK)
        return 1;
    if (mem_space == H5S_ALL)
        return file_space == H5S_ALL || H5Sget_select_type(file_space) == H5S_SEL_ALL;
    return H5Sget_select_type(mem_space) == H5S_SEL_ALL &&
           H5Sget_select_npoints(mem_space) == npoints;
}

static int serve(pv_obj *o, hid_t mem_type, hid_t mem_space, hid_t file_space, hid_t dxpl,
                 void *buf)
{
    entry *e = entry_for(o);
    if (!e || !e->serve || !e->decider)
        return 0;
    H5T_class_t cls = H5Tget_class(mem_type);
    size_t item = H5Tget_size(mem_type);
    if ((cls != H5T_INTEGER && cls != H5T_FLOAT) || !item)
        return 0;
    hid_t space = file_space;
    if (file_space == H5S_ALL) {
        H5VL_dataset_get_args_t sp = {.op_type = H5VL_DATASET_GET_SPACE};
        if (H5VLdataset_get(o->under_object, o->under_vol_id, &sp, H5P_DATASET_XFER_DEFAULT,
                            NULL) < 0)
            return 0;
        space = sp.args.get_space.space_id;
    }
    int served = 0, rank = H5Sget_simple_extent_ndims(space), points = 0;
    hsize_t dims[MAX_RANK];
    hssize_t npoints = H5Sget_select_npoints(space);
    uint64_t n = 0, *req = NULL;
    PatioPlan *plan = NULL;
    if (rank <= 0 || rank > MAX_RANK || npoints <= 0 ||
        H5Sget_simple_extent_dims(space, dims, NULL) != rank ||
        !dense_memory(mem_space, file_space, npoints) ||
        !(req = request(space, rank, dims, &points, &n)))
        goto done;
    int rc = points ? C.plan_points(e->decider, (uint32_t)rank, n, req, &plan)
                    : C.plan(e->decider, (uint32_t)rank, n, req, &plan);
    int32_t kind = 0;
    double seconds = 0, saved = 0;
    uint64_t npieces = 0, bdims[MAX_RANK], brank = 0;
    if (rc != PATIO_OK || C.summary(plan, &kind, &seconds, &saved, &npieces) != PATIO_OK ||
        kind == PATIO_PLAN_ORIGINAL || C.buffer(plan, bdims, MAX_RANK, &brank) != PATIO_OK)
        goto done;
    /* A product request fills a buffer of the dataset's rank (row-major = HDF5's
     * order); points fill a 1-D buffer in list order; anything else is not served. */
    if (points ? brank != 1 : brank != (uint64_t)rank)
        goto done;
    uint64_t total = 1;
    for (uint64_t a = 0; a < brank; a++)
        total *= bdims[a];
    if (total != (uint64_t)npoints)
        goto done;
    int64_t used[64];
    int nused = 0;
    served = 1;
    for (uint64_t i = 0; i < npieces && served; i++) {
        int64_t r = run_piece(e, o, plan, i, mem_type, dxpl, (int)brank, bdims, buf, item);
        if (r == -2) {
            served = 0;
            int64_t copy = -1;
            uint32_t order[MAX_RANK];
            uint64_t nn = 0, rep = 0;
            if (C.piece(plan, i, &copy, order, MAX_RANK, &nn) == PATIO_OK && copy >= 0 &&
                C.copy(e->serve, copy, &rep) == PATIO_OK) {
                pv_warn("%s%s: replica read failed; reading the original from now on", e->file,
                        e->dset);
                C.damaged(e->serve, rep, "a read through the VOL connector failed");
                entry_drop(e);
            }
        } else if (r >= 0 && nused < 64) {
            int seen = 0;
            for (int k = 0; k < nused; k++)
                seen |= used[k] == r;
            if (!seen)
                used[nused++] = r;
        }
    }
    for (int k = 0; served && k < nused; k++)
        C.used(e->serve, (uint64_t)used[k], saved / nused);
done:
    if (plan)
        C.plan_free(plan);
    free(req);
    if (space != file_space)
        H5Sclose(space);
    return served;
}

/* The entry of a dataset already looked at, when it has nothing to serve (NULL:
 * otherwise) - checked with no HDF5 call, so such reads skip the error-stack handling. */
static const entry *known_empty(pv_obj *o)
{
    const char *file = NULL, *dset = NULL;
    if (!o->dset || !pv_dataset_names(o, &file, &dset))
        return NULL;
    file = resolved(file);
    for (size_t i = 0; i < nentries; i++)
        if (!strcmp(entries[i].dset, dset) && !strcmp(entries[i].file, file))
            return entries[i].serve ? NULL : &entries[i];
    return NULL;
}

int pv_serve_read(pv_obj *o, hid_t mem_type, hid_t mem_space, hid_t file_space, hid_t dxpl,
                  void *buf)
{
    if (!C.on || file_space == H5S_PLIST || known_empty(o))
        return 0;
    int served = 0;
    H5E_BEGIN_TRY
    {
        served = serve(o, mem_type, mem_space, file_space, dxpl, buf);
    }
    H5E_END_TRY
    return served;
}
