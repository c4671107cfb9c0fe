/* record.c - recording the connector's dataset reads into the layout knowledge base.
 *
 * A read is recorded when its file has a knowledge base (kb.sqlite in the directory
 * patio_kb_dir names), its dataset holds integers or floats and has at least one
 * dimension, and its selection is not empty - the reads patio.h5 records. The file
 * selection goes over as HDF5 describes it (all, a regular hyperslab, the blocks of an
 * irregular one, or points) with the result's shape (the memory dataspace's extent;
 * the dataset's with H5S_ALL) to the layout core (libpatio_layout.so, loaded with
 * dlopen from this library's directory or its parent, or from $PATIO_LAYOUT_LIB),
 * which writes the rows patio.h5 writes into the process's record log.
 *
 * Nothing here can fail a read: a missing library, another HDF5 release than the one
 * the connector was built for, PATIO_LAYOUT=off, or a log that cannot be written each
 * give at most one warning line, and the reads pass through unrecorded.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <limits.h>
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
    int (*close)(PatioRecorder *);
} L;

/* The recorders of the files read from, by name (NULL recorder: no knowledge base, or
 * recording failed for it - once per open of the file). */
typedef struct {
    char *file;
    PatioRecorder *rec;
} entry;
static entry *files;
static size_t nfiles;

static int load(const char *path)
{
    L.lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!L.lib)
        return 0;
    *(void **)&L.last_error = dlsym(L.lib, "patio_layout_last_error");
    *(void **)&L.open = dlsym(L.lib, "patio_recorder_open");
    *(void **)&L.read = dlsym(L.lib, "patio_recorder_read");
    *(void **)&L.close = dlsym(L.lib, "patio_recorder_close");
    if (L.last_error && L.open && L.read && L.close)
        return 1;
    dlclose(L.lib);
    L.lib = NULL;
    return 0;
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
    pv_serve_init(L.lib);
}

void pv_record_term(void)
{
    for (size_t i = 0; i < nfiles; i++) {
        if (files[i].rec)
            L.close(files[i].rec);
        free(files[i].file);
    }
    free(files);
    files = NULL;
    nfiles = 0;
    /* The library stays loaded: a recorder's log may still be referenced by HDF5's
     * remaining shutdown, and unloading Rust code buys nothing at exit. */
}

static entry *recorder_for(const char *file)
{
    for (size_t i = 0; i < nfiles; i++)
        if (!strcmp(files[i].file, file))
            return &files[i];
    entry *grown = realloc(files, (nfiles + 1) * sizeof *files);
    if (!grown)
        return NULL;
    files = grown;
    entry *e = &files[nfiles];
    e->file = strdup(file);
    e->rec = NULL;
    if (!e->file)
        return NULL;
    nfiles++;
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
        if (strcmp(files[i].file, name))
            continue;
        if (files[i].rec && L.close(files[i].rec) != PATIO_OK)
            pv_warn("%s: reads not recorded: %s", name, L.last_error());
        free(files[i].file);
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

/* The file selection as PATIO_REC_* kind and values (malloc'd, or NULL for none). */
static int selection(hid_t space, int rank, int32_t *kind, uint64_t *nitems, hsize_t **values)
{
    *values = NULL;
    *nitems = 0;
    switch (H5Sget_select_type(space)) {
    case H5S_SEL_ALL:
        *kind = PATIO_REC_ALL;
        return 1;
    case H5S_SEL_POINTS: {
        hssize_t n = H5Sget_select_elem_npoints(space);
        if (n <= 0 || !(*values = malloc((size_t)n * (size_t)rank * sizeof(hsize_t))))
            return 0;
        *kind = PATIO_REC_POINTS;
        *nitems = (uint64_t)n;
        return H5Sget_select_elem_pointlist(space, 0, (hsize_t)n, *values) >= 0;
    }
    case H5S_SEL_HYPERSLABS:
        if (H5Sis_regular_hyperslab(space) > 0) {
            if (!(*values = malloc(4 * (size_t)rank * sizeof(hsize_t))))
                return 0;
            hsize_t *v = *values;
            *kind = PATIO_REC_REGULAR;
            *nitems = 1;
            return H5Sget_regular_hyperslab(space, v, v + rank, v + 2 * rank, v + 3 * rank) >= 0;
        } else {
            hssize_t n = H5Sget_select_hyper_nblocks(space);
            if (n <= 0 || !(*values = malloc((size_t)n * 2 * (size_t)rank * sizeof(hsize_t))))
                return 0;
            *kind = PATIO_REC_BLOCKS;
            *nitems = (uint64_t)n;
            return H5Sget_select_hyper_blocklist(space, 0, (hsize_t)n, *values) >= 0;
        }
    default:
        return 0;
    }
}

static void record(pv_obj *o, hid_t mem_type_id, hid_t mem_space_id, hid_t file_space_id,
                   double t_end, double seconds)
{
    if (!o->dset && !(o->dset = describe(o)))
        return;
    struct pv_dset *d = o->dset;
    if (!d->recordable || file_space_id == H5S_PLIST)
        return;
    entry *e = recorder_for(d->file);
    if (!e || !e->rec)
        return;
    hid_t space = file_space_id == H5S_ALL ? dataset_space(o) : file_space_id;
    if (space < 0)
        return;
    hsize_t shape[MAX_RANK], out[MAX_RANK], *values = NULL;
    int rank = H5Sget_simple_extent_ndims(space), out_rank = rank;
    hssize_t npoints = H5Sget_select_npoints(space);
    int32_t kind = 0;
    uint64_t nitems = 0;
    if (rank > 0 && rank <= MAX_RANK && npoints > 0 &&
        H5Sget_simple_extent_dims(space, shape, NULL) == rank &&
        selection(space, rank, &kind, &nitems, &values)) {
        if (mem_space_id == H5S_ALL) {
            memcpy(out, shape, sizeof(hsize_t) * (size_t)rank);
        } else if (mem_space_id == H5S_BLOCK) {
            out_rank = 1;
            out[0] = (hsize_t)npoints;
        } else {
            out_rank = H5Sget_simple_extent_ndims(mem_space_id);
            if (out_rank < 0 || out_rank > MAX_RANK ||
                H5Sget_simple_extent_dims(mem_space_id, out, NULL) != out_rank)
                out_rank = -1;
        }
        size_t item = H5Tget_size(mem_type_id);
        if (out_rank >= 0 &&
            L.read(e->rec, d->name, (uint32_t)rank, shape, kind, nitems, values,
                   (uint32_t)out_rank, out, (uint64_t)npoints * item, t_end,
                   seconds) != PATIO_OK) {
            pv_warn("%s: reads not recorded: %s", d->file, L.last_error());
            L.close(e->rec);
            e->rec = NULL;
        }
    }
    free(values);
    if (space != file_space_id)
        H5Sclose(space);
}

int pv_dataset_names(pv_obj *o, const char **file, const char **name)
{
    if (!o->dset && !(o->dset = describe(o)))
        return 0;
    if (!o->dset->recordable)
        return 0;
    *file = o->dset->file;
    *name = o->dset->name;
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

void pv_record_read(pv_obj *dset, hid_t mem_type_id, hid_t mem_space_id, hid_t file_space_id,
                    double t_end, double seconds)
{
    if (!L.on)
        return;
    H5E_BEGIN_TRY
    {
        record(dset, mem_type_id, mem_space_id, file_space_id, t_end, seconds);
    }
    H5E_END_TRY
}
