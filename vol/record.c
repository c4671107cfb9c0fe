/* record.c - recording the connector's dataset reads into the layout knowledge base.
 *
 * A read is recorded when its file has a knowledge base (kb.sqlite in the directory
 * patio_kb_dir names), its dataset holds integers or floats and has at least one
 * dimension, and its selection is not empty - the reads patio.h5 records. The file
 * selection goes over as HDF5 describes it (all, a regular hyperslab, the blocks of an
 * irregular one, or points) with the result's shape (the memory dataspace's extent;
 * the dataset's with H5S_ALL) to the layout core (libpatio_layout.so, loaded with
 * dlopen from this library's directory or its parent, or from $PATIO_LAYOUT_LIB),
 * which writes the rows patio.h5 writes into the process's record log - in batches:
 * the raw selections wait in a buffer per file (see `pending`).
 *
 * Nothing here can fail a read: a missing library, another HDF5 release than the one
 * the connector was built for, PATIO_LAYOUT=off, or a log that cannot be written each
 * give at most one warning line, and the reads pass through unrecorded.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "patio_layout.h"
#include "vol.h"

#define MAX_RANK 32

struct pv_dset {
    int recordable; /* 1: record its reads; 0: never */
    char *name;     /* its path in the file */
    char *file;     /* its file's name, as opened */
};

static struct {
    int on; /* recording possible at all */
    void *lib;
    const char *(*last_error)(void);
    int (*open)(const char *, PatioRecorder **);
    int (*read)(PatioRecorder *, const char *, uint32_t, const uint64_t *, int32_t, uint64_t,
                const uint64_t *, uint32_t, const uint64_t *, uint64_t, double, double);
    int (*flush)(PatioRecorder *);
    int (*close)(PatioRecorder *);
} L;

/* A read waiting to be handed to the layout core: recording keeps each read's raw
 * selection (as HDF5 gave it) in its file's buffer and hands the buffer over in one
 * go - every BATCH reads, when its values pass ARENA_FLUSH, and when the file closes -
 * so a read pays only the selection queries and a copy, and the core's encoding runs
 * between reads, not inside them. */
typedef struct {
    uint32_t name; /* index into the entry's names */
    int32_t kind;  /* PATIO_REC_* */
    uint32_t rank, out_rank;
    uint64_t nitems, bytes;
    double t_end, seconds;
    size_t at; /* shape[rank], out[out_rank], then the values, in the arena */
} pending;

/* Reads buffered per file before they go to the layout core (its own batch, after
 * which it appends a frame to the log, is the same size). */
#define BATCH 256
/* Buffered selection values (8 bytes each) past which the buffer goes over at once. */
#define ARENA_FLUSH ((size_t)1 << 16)

/* The recorders of the files read from, by name (NULL recorder: no knowledge base, or
 * recording failed for it - once per open of the file), and each one's reads not yet
 * handed over, with the dataset names they name. */
typedef struct {
    char *file;
    PatioRecorder *rec;
    char **names;
    size_t nnames, last;
    pending reads[BATCH];
    size_t nreads;
    uint64_t *arena;
    size_t used, cap;
} entry;
static entry **files;
static size_t nfiles;

static int load(const char *path)
{
    L.lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!L.lib)
        return 0;
    *(void **)&L.last_error = dlsym(L.lib, "patio_layout_last_error");
    *(void **)&L.open = dlsym(L.lib, "patio_recorder_open");
    *(void **)&L.read = dlsym(L.lib, "patio_recorder_read");
    *(void **)&L.flush = dlsym(L.lib, "patio_recorder_flush");
    *(void **)&L.close = dlsym(L.lib, "patio_recorder_close");
    if (L.last_error && L.open && L.read && L.flush && L.close)
        return 1;
    dlclose(L.lib);
    L.lib = NULL;
    return 0;
}

/* In a forked child: the reads buffered so far are the parent's, which records them. */
static void forked(void)
{
    for (size_t i = 0; i < nfiles; i++)
        files[i]->nreads = files[i]->used = 0;
}

void pv_record_init(void)
{
    const char *off = getenv("PATIO_LAYOUT");
    if (off && (!strcmp(off, "0") || !strcasecmp(off, "off") || !strcasecmp(off, "no")))
        return;
    unsigned maj = 0, min = 0, rel = 0;
    H5get_libversion(&maj, &min, &rel);
    if (maj != H5_VERS_MAJOR || min != H5_VERS_MINOR) {
        pv_warn("built for HDF5 %d.%d, running under HDF5 %u.%u.%u: reads pass through "
                "unrecorded",
                H5_VERS_MAJOR, H5_VERS_MINOR, maj, min, rel);
        return;
    }
    const char *env = getenv("PATIO_LAYOUT_LIB");
    char path[PATH_MAX];
    int ok = 0;
    if (env && *env) {
        ok = load(env);
        snprintf(path, sizeof path, "%s", env);
    } else {
        Dl_info self;
        if (dladdr((void *)pv_record_init, &self) && self.dli_fname) {
            const char *slash = strrchr(self.dli_fname, '/');
            int dir = slash ? (int)(slash - self.dli_fname) : 1;
            const char *base = slash ? self.dli_fname : ".";
            snprintf(path, sizeof path, "%.*s/libpatio_layout.so", dir, base);
            ok = load(path);
            if (!ok) {
                snprintf(path, sizeof path, "%.*s/../libpatio_layout.so", dir, base);
                ok = load(path);
            }
        } else {
            snprintf(path, sizeof path, "libpatio_layout.so");
        }
    }
    if (!ok) {
        pv_warn("cannot load the layout core (%s: %s): reads pass through unrecorded", path,
                dlerror());
        return;
    }
    L.on = 1;
    pthread_atfork(NULL, NULL, forked);
    pv_serve_init(L.lib);
}

/* Recording of the file stops (one warning): its recorder closed, its buffer dropped. */
static void give_up(entry *e)
{
    pv_warn("%s: reads not recorded: %s", e->file, L.last_error());
    L.close(e->rec);
    e->rec = NULL;
    e->nreads = e->used = 0;
}

/* Hands the file's buffered reads to the layout core, in the order they were read,
 * and has it append them to the log at once (so that nothing buffered there either is
 * inherited by a forked child). */
static void flush(entry *e)
{
    for (size_t i = 0; i < e->nreads && e->rec; i++) {
        const pending *p = &e->reads[i];
        const uint64_t *shape = e->arena + p->at, *out = shape + p->rank;
        if (L.read(e->rec, e->names[p->name], p->rank, shape, p->kind, p->nitems,
                   out + p->out_rank, p->out_rank, out, p->bytes, p->t_end,
                   p->seconds) != PATIO_OK)
            give_up(e);
    }
    if (e->nreads && e->rec && L.flush(e->rec) != PATIO_OK)
        give_up(e);
    e->nreads = e->used = 0;
}

/* Ends recording of one file: its reads handed over, its log ended. */
static void entry_free(entry *e)
{
    flush(e);
    if (e->rec && L.close(e->rec) != PATIO_OK)
        pv_warn("%s: reads not recorded: %s", e->file, L.last_error());
    for (size_t i = 0; i < e->nnames; i++)
        free(e->names[i]);
    free(e->names);
    free(e->arena);
    free(e->file);
    free(e);
}

void pv_record_term(void)
{
    for (size_t i = 0; i < nfiles; i++)
        entry_free(files[i]);
    free(files);
    files = NULL;
    nfiles = 0;
    /* The library stays loaded: a recorder's log may still be referenced by HDF5's
     * remaining shutdown, and unloading Rust code buys nothing at exit. */
}

static entry *recorder_for(const char *file)
{
    for (size_t i = 0; i < nfiles; i++)
        if (!strcmp(files[i]->file, file))
            return files[i];
    entry **grown = realloc(files, (nfiles + 1) * sizeof *files);
    if (!grown)
        return NULL;
    files = grown;
    entry *e = calloc(1, sizeof *e);
    if (!e || !(e->file = strdup(file))) {
        free(e);
        return NULL;
    }
    files[nfiles++] = e;
    if (L.open(file, &e->rec) != PATIO_OK) {
        pv_warn("%s: reads not recorded: %s", file, L.last_error());
        e->rec = NULL;
    }
    return e;
}

void pv_record_file_opened(const char *name)
{
    if (L.on)
        (void)recorder_for(name);
}

void pv_record_file_closed(const char *name)
{
    for (size_t i = 0; i < nfiles; i++) {
        if (strcmp(files[i]->file, name))
            continue;
        entry_free(files[i]);
        files[i] = files[--nfiles];
        return;
    }
}

void pv_record_dset_free(struct pv_dset *d)
{
    if (!d)
        return;
    free(d->name);
    free(d->file);
    free(d);
}

/* A name got in two calls (the length, then the name). */
static char *object_name(pv_obj *o, int file)
{
    size_t len = 0;
    char *buf = NULL;
    for (int pass = 0; pass < 2; pass++) {
        herr_t rc;
        if (file) {
            H5VL_file_get_args_t a = {.op_type = H5VL_FILE_GET_NAME};
            a.args.get_name = (H5VL_file_get_name_args_t){H5I_DATASET, buf ? len + 1 : 0, buf, &len};
            rc = H5VLfile_get(o->under_object, o->under_vol_id, &a, H5P_DATASET_XFER_DEFAULT, NULL);
        } else {
            H5VL_loc_params_t self = {.obj_type = H5I_DATASET, .type = H5VL_OBJECT_BY_SELF};
            H5VL_object_get_args_t a = {.op_type = H5VL_OBJECT_GET_NAME};
            a.args.get_name.buf_size = buf ? len + 1 : 0;
            a.args.get_name.buf = buf;
            a.args.get_name.name_len = &len;
            rc = H5VLobject_get(o->under_object, &self, o->under_vol_id, &a,
                                H5P_DATASET_XFER_DEFAULT, NULL);
        }
        if (rc < 0 || (pass == 0 && !(buf = calloc(1, len + 1)))) {
            free(buf);
            return NULL;
        }
    }
    return buf;
}

/* What recording needs to know of a dataset, found at its first read. */
static struct pv_dset *describe(pv_obj *o)
{
    struct pv_dset *d = calloc(1, sizeof *d);
    if (!d)
        return NULL;
    H5VL_dataset_get_args_t a = {.op_type = H5VL_DATASET_GET_TYPE};
    if (H5VLdataset_get(o->under_object, o->under_vol_id, &a, H5P_DATASET_XFER_DEFAULT, NULL) >= 0) {
        H5T_class_t cls = H5Tget_class(a.args.get_type.type_id);
        d->recordable = cls == H5T_INTEGER || cls == H5T_FLOAT;
        H5Tclose(a.args.get_type.type_id);
    }
    if (d->recordable) {
        d->name = object_name(o, 0);
        d->file = object_name(o, 1);
        d->recordable = d->name && d->file && d->name[0];
    }
    return d;
}

static hid_t dataset_space(pv_obj *o)
{
    H5VL_dataset_get_args_t a = {.op_type = H5VL_DATASET_GET_SPACE};
    if (H5VLdataset_get(o->under_object, o->under_vol_id, &a, H5P_DATASET_XFER_DEFAULT, NULL) < 0)
        return H5I_INVALID_HID;
    return a.args.get_space.space_id;
}

/* Room for n more values in e's arena (NULL: none). */
static uint64_t *reserve(entry *e, size_t n)
{
    if (e->used + n > e->cap) {
        size_t cap = e->cap ? e->cap : 1024;
        while (cap < e->used + n)
            cap *= 2;
        uint64_t *grown = realloc(e->arena, cap * sizeof *grown);
        if (!grown)
            return NULL;
        e->arena = grown;
        e->cap = cap;
    }
    return e->arena + e->used;
}

/* The index of dataset `name` among e's names (added when new; -1: no memory). */
static long name_index(entry *e, const char *name)
{
    if (e->last < e->nnames && !strcmp(e->names[e->last], name))
        return (long)e->last;
    for (size_t i = 0; i < e->nnames; i++)
        if (!strcmp(e->names[i], name))
            return (long)(e->last = i);
    char **grown = realloc(e->names, (e->nnames + 1) * sizeof *grown);
    if (!grown)
        return -1;
    e->names = grown;
    if (!(e->names[e->nnames] = strdup(name)))
        return -1;
    return (long)(e->last = e->nnames++);
}

/* Buffers the file selection of `space` (p->rank dims `shape`) read into a result of
 * `out` (p->out_rank dims; -1: the selection's element count, 1-D): the selection as
 * PATIO_REC_* kind and values, taken straight from HDF5 into the arena, and its element
 * count. 0: not recorded. */
static int buffer(entry *e, pending *p, hid_t space, const hsize_t *shape, const hsize_t *out,
                  hssize_t *npoints)
{
    size_t rank = p->rank, n = 0;
    hssize_t items = 0;
    switch (H5Sget_select_type(space)) {
    case H5S_SEL_ALL:
        p->kind = PATIO_REC_ALL;
        *npoints = 1;
        for (size_t a = 0; a < rank; a++)
            *npoints *= (hssize_t)shape[a];
        break;
    case H5S_SEL_POINTS:
        p->kind = PATIO_REC_POINTS;
        *npoints = items = H5Sget_select_elem_npoints(space);
        n = (size_t)(items > 0 ? items : 0) * rank;
        break;
    case H5S_SEL_HYPERSLABS:
        if (H5Sis_regular_hyperslab(space) > 0) {
            p->kind = PATIO_REC_REGULAR;
            items = 1;
            n = 4 * rank;
        } else {
            p->kind = PATIO_REC_BLOCKS;
            items = H5Sget_select_hyper_nblocks(space);
            *npoints = H5Sget_select_npoints(space);
            n = (size_t)(items > 0 ? items : 0) * 2 * rank;
        }
        break;
    default:
        return 0;
    }
    if (items < 0)
        return 0;
    size_t out_rank = out ? p->out_rank : 1, head = rank + out_rank;
    uint64_t *v = reserve(e, head + n);
    if (!v)
        return 0;
    hsize_t *sel = v + head;
    int ok = 1;
    if (p->kind == PATIO_REC_POINTS) {
        ok = items > 0 && H5Sget_select_elem_pointlist(space, 0, (hsize_t)items, sel) >= 0;
    } else if (p->kind == PATIO_REC_REGULAR) {
        ok = H5Sget_regular_hyperslab(space, sel, sel + rank, sel + 2 * rank, sel + 3 * rank) >= 0;
        *npoints = 1;
        for (size_t a = 0; ok && a < rank; a++)
            *npoints *= (hssize_t)(sel[2 * rank + a] * sel[3 * rank + a]);
    } else if (p->kind == PATIO_REC_BLOCKS) {
        ok = items > 0 && H5Sget_select_hyper_blocklist(space, 0, (hsize_t)items, sel) >= 0;
    }
    if (!ok || *npoints <= 0)
        return 0;
    memcpy(v, shape, rank * sizeof *v);
    if (out)
        memcpy(v + rank, out, out_rank * sizeof *v);
    else
        v[rank] = (uint64_t)*npoints;
    p->out_rank = (uint32_t)out_rank;
    p->nitems = (uint64_t)items;
    p->at = e->used;
    e->used += head + n;
    return 1;
}

/* Dataspace queries below go without their rank first: H5Sget_simple_extent_dims
 * returns it, and no dataspace has more than H5S_MAX_RANK (= MAX_RANK) dimensions. */
_Static_assert(H5S_MAX_RANK <= MAX_RANK, "a dims buffer holds any dataspace's");

static void record(pv_obj *o, hid_t mem_type_id, hid_t mem_space_id, hid_t file_space_id,
                   double t_end, double seconds)
{
    struct pv_dset *d = o->dset;
    if (!d->recordable || file_space_id == H5S_PLIST)
        return;
    entry *e = recorder_for(d->file);
    if (!e || !e->rec)
        return;
    hid_t space = file_space_id == H5S_ALL ? dataset_space(o) : file_space_id;
    if (space < 0)
        return;
    hsize_t shape[MAX_RANK], out[MAX_RANK];
    int rank = H5Sget_simple_extent_dims(space, shape, NULL), out_rank = rank;
    const hsize_t *out_dims = out;
    if (mem_space_id == H5S_ALL)
        out_dims = shape;
    else if (mem_space_id == H5S_BLOCK)
        out_dims = NULL; /* 1-D, the selection's element count */
    else
        out_rank = H5Sget_simple_extent_dims(mem_space_id, out, NULL);
    long name = rank > 0 && out_rank >= 0 ? name_index(e, d->name) : -1;
    if (name >= 0) {
        pending *p = &e->reads[e->nreads];
        *p = (pending){.name = (uint32_t)name, .rank = (uint32_t)rank,
                       .out_rank = (uint32_t)out_rank, .t_end = t_end, .seconds = seconds};
        hssize_t npoints = 0;
        if (buffer(e, p, space, shape, out_dims, &npoints)) {
            p->bytes = (uint64_t)npoints * H5Tget_size(mem_type_id);
            if (++e->nreads == BATCH || e->used >= ARENA_FLUSH)
                flush(e);
        }
    }
    if (space != file_space_id)
        H5Sclose(space);
}

/* The dataset's description, made at its first read (with HDF5's error reporting off:
 * a failure only means its reads are not recorded). */
static struct pv_dset *described(pv_obj *o)
{
    if (!o->dset) {
        H5E_BEGIN_TRY
        {
            o->dset = describe(o);
        }
        H5E_END_TRY
    }
    return o->dset;
}

int pv_dataset_names(pv_obj *o, const char **file, const char **name)
{
    struct pv_dset *d = described(o);
    if (!d || !d->recordable)
        return 0;
    *file = d->file;
    *name = d->name;
    return 1;
}

int pv_record_wanted(pv_obj *dset)
{
    if (!L.on)
        return 0;
    struct pv_dset *d = dset->dset;
    if (!d)
        return 1; /* not described yet: its first read finds out */
    if (!d->recordable)
        return 0;
    entry *e = recorder_for(d->file);
    return e && e->rec;
}

/* HDF5's queries of valid dataspaces (HDF5 checked the read's arguments before it
 * reached the connector) do not fail, so the error stack is not saved and restored
 * around them - that costs more than the queries. */
void pv_record_read(pv_obj *dset, hid_t mem_type_id, hid_t mem_space_id, hid_t file_space_id,
                    double t_end, double seconds)
{
    if (L.on && described(dset))
        record(dset, mem_type_id, mem_space_id, file_space_id, t_end, seconds);
}
