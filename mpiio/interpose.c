/*
 * interpose.c — the MPI_File_* entry points libpatio_mpiio.so defines over the MPI
 * library's (which it reaches through PMPI_*). A call on a file the layer does not
 * watch costs one load of a flag and an indirect call; everything else is io.c's.
 *
 * Watched files: traced (PATIO_TRACE_DIR with libpatio_trace.so loaded), served (a
 * registered, current reorganized file, serve.c) or counted (PATIO_MPIIO_STATS=DIR:
 * each rank writes a JSON record per file at close, or at MPI_Finalize for files left
 * open).
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mpiio.h"

#define WATCHING() __atomic_load_n(&mpiio_watching, __ATOMIC_RELAXED)

EXPORT int MPI_File_open(MPI_Comm comm, const char *name, int amode, MPI_Info info, MPI_File *fh)
{
    /* every rank decides alike: the same registration, the same environment */
    if (!mpiio_depth && mpiio_ready() && serve_refuses_write(name, amode))
        return MPI_ERR_READ_ONLY;
    int rc = P(File_open)(comm, name, amode, info, fh);
    if (rc != MPI_SUCCESS || mpiio_depth || !mpiio_ready())
        return rc;
    mpiio_depth++;
    pfile_t *f = calloc(1, sizeof *f);
    PatioReorgFile *h = f ? serve_try(name, amode) : NULL;
    /* One agreement across the file's ranks: serve (every rank can) and trace (every
     * rank traces). Either needs the communicator later (collective set_view, ordered
     * offsets): a duplicate, since the program may free its own after the open. */
    const char *order = getenv("PATIO_MPIIO_ORDER");
    int mine[3] = {h != NULL, f && trace_available(), order && strcmp(order, "1") == 0};
    int all[3] = {0, 0, 0};
    if (P(Allreduce)(mine, all, 3, H.int_, H.min, comm) != MPI_SUCCESS)
        all[0] = all[1] = all[2] = 0;
    if (!all[0]) {
        serve_release(h);
        h = NULL;
    }
    if (f) {
        f->fh = *fh;
        snprintf(f->name, sizeof f->name, "%s", name);
        if (!realpath(name, f->path))
            snprintf(f->path, sizeof f->path, "%s", name);
        f->served = h;
        f->serving = all[0];
        f->trace = all[1];
        f->ordered = all[0] && all[2];
        if ((all[0] || all[1]) && P(Comm_dup)(comm, &f->comm) == MPI_SUCCESS)
            f->own_comm = 1;
        if (f->own_comm && P(Comm_rank)(f->comm, &f->rank) != MPI_SUCCESS)
            f->rank = -1;
        const char *stats = getenv("PATIO_MPIIO_STATS");
        f->stats = stats && *stats;
        view_default(&f->view);
        f->view_ok = 1;
        prefetch_open(f, amode);
        /* (a full table, 4096 watched files, leaks the duplicate: freeing it is
         * collective and the other ranks may have had room) */
        if (!(f->trace || f->serving || f->stats || f->prefetch) || files_add(f) != 0) {
            prefetch_close(f);
            serve_close(f);
            free(f);
        }
    }
    mpiio_depth--;
    return rc;
}

static void finish(pfile_t *f)
{
    prefetch_close(f);
    if (f->stats)
        stats_write(f);
    serve_close(f);
    shared_close(f);
    view_free(&f->view);
    if (f->own_comm)
        P(Comm_free)(&f->comm);
}

/* The layer's record of an open file when the layer watches it and the call comes from
 * the program (not from the layer itself), or NULL. */
static pfile_t *watched(MPI_File fh)
{
    return WATCHING() && !mpiio_depth ? files_find(fh) : NULL;
}

/* A served file whose pointers the layer keeps, or NULL. */
static pfile_t *serving(MPI_File fh)
{
    pfile_t *f = watched(fh);
    return f && f->serving ? f : NULL;
}

/* The position, in etypes of the view, that a seek by `offset` from `whence` names, with
 * `current` the pointer it moves (individual or shared): MPI_ERR_ARG for an unknown
 * `whence` or a position before the view's start. */
static int seek_target(pfile_t *f, MPI_Offset offset, int whence, MPI_Offset current,
                       MPI_Offset *at)
{
    MPI_Offset base;
    if (whence == MPI_SEEK_SET) {
        base = 0;
    } else if (whence == MPI_SEEK_CUR) {
        base = current;
    } else if (whence == MPI_SEEK_END) {
        MPI_Offset size;
        int rc = P(File_get_size)(f->fh, &size);
        if (rc != MPI_SUCCESS)
            return rc;
        base = (MPI_Offset)(view_bytes_before(&f->view, (uint64_t)size) /
                            (uint64_t)f->view.etype_size);
    } else {
        return MPI_ERR_ARG;
    }
    if (base + offset < 0)
        return MPI_ERR_ARG;
    *at = base + offset;
    return MPI_SUCCESS;
}

EXPORT int MPI_File_close(MPI_File *fh)
{
    pfile_t *f = watched(*fh);
    if (f) {
        files_remove(f);
        finish(f);
        free(f);
    }
    return P(File_close)(fh);
}

static void finish_open(pfile_t *f)
{
    if (f->stats)
        stats_write(f);
    f->stats = 0;
}

EXPORT int MPI_Finalize(void)
{
    if (WATCHING())
        files_each(finish_open);
    return P(Finalize)();
}

EXPORT int MPI_File_set_view(MPI_File fh, MPI_Offset disp, MPI_Datatype etype,
                             MPI_Datatype filetype, const char *datarep, MPI_Info info)
{
    int rc = P(File_set_view)(fh, disp, etype, filetype, datarep, info);
    pfile_t *f = watched(fh);
    if (rc != MPI_SUCCESS || !f)
        return rc;
    mpiio_depth++;
    f->view_ok = view_set(&f->view, disp, etype, filetype) == 0;
    f->pos = 0;
    f->shared_passed = 0; /* MPI's shared pointer is 0 again too */
    if (f->serving && f->shared_ok && P(Barrier)(f->comm) == MPI_SUCCESS && f->rank == 0)
        shared_set(f, 0); /* when every rank is done with the old view's pointer; the
                             others see it after the allreduce below */
    if (f->serving) {
        /* collective: every rank keeps serving, or none does (native data
         * representation only: another one converts bytes) */
        int mine = f->view_ok && datarep && strcmp(datarep, "native") == 0, all = mine;
        if (P(Allreduce)(&mine, &all, 1, H.int_, H.min, f->comm) != MPI_SUCCESS || !all) {
            if (!mine)
                mpiio_warn("%s: a file view the layer cannot flatten; reading the original",
                           f->name);
            serve_close(f);
            f->serving = 0; /* the real pointer is 0 after set_view, as ours was */
        }
    }
    mpiio_depth--;
    return rc;
}

EXPORT int MPI_File_get_view(MPI_File fh, MPI_Offset *disp, MPI_Datatype *etype,
                             MPI_Datatype *filetype, char *datarep)
{
    return P(File_get_view)(fh, disp, etype, filetype, datarep);
}

EXPORT int MPI_File_seek(MPI_File fh, MPI_Offset offset, int whence)
{
    pfile_t *f = serving(fh);
    if (!f)
        return P(File_seek)(fh, offset, whence);
    MPI_Offset at;
    int rc = seek_target(f, offset, whence, f->pos, &at);
    if (rc == MPI_SUCCESS)
        f->pos = at;
    return rc;
}

EXPORT int MPI_File_get_position(MPI_File fh, MPI_Offset *offset)
{
    pfile_t *f = serving(fh);
    if (!f)
        return P(File_get_position)(fh, offset);
    *offset = f->pos;
    return MPI_SUCCESS;
}

EXPORT int MPI_File_get_size(MPI_File fh, MPI_Offset *size)
{
    return P(File_get_size)(fh, size);
}

EXPORT int MPI_File_seek_shared(MPI_File fh, MPI_Offset offset, int whence)
{
    pfile_t *f = serving(fh);
    if (f) { /* collective: the layer may take the shared pointer over here */
        mpiio_depth++;
        shared_take(f);
        mpiio_depth--;
    }
    if (!f || !f->shared_ok)
        return P(File_seek_shared)(fh, offset, whence);
    /* collective, every rank with the same arguments: once every rank is done with the
     * pointer as it was (a barrier), rank 0 moves it, and tells the others */
    mpiio_depth++;
    int rc = P(Barrier)(f->comm);
    if (rc == MPI_SUCCESS && f->rank == 0) {
        MPI_Offset now = 0, at = 0;
        if (whence == MPI_SEEK_CUR)
            rc = shared_get(f, &now);
        if (rc == MPI_SUCCESS)
            rc = seek_target(f, offset, whence, now, &at);
        if (rc == MPI_SUCCESS)
            rc = shared_set(f, at);
    }
    int err = P(Bcast)(&rc, 1, H.int_, 0, f->comm);
    mpiio_depth--;
    return err != MPI_SUCCESS ? err : rc;
}

EXPORT int MPI_File_get_position_shared(MPI_File fh, MPI_Offset *offset)
{
    pfile_t *f = serving(fh);
    if (!f || !f->shared_ok)
        return P(File_get_position_shared)(fh, offset);
    mpiio_depth++;
    int rc = shared_get(f, offset);
    mpiio_depth--;
    return rc;
}

/* MPI's sync-barrier-sync rule: after a sync at which any rank had written the file, every
 * rank must be able to see the writes, so no rank is served any more. Collective. */
EXPORT int MPI_File_sync(MPI_File fh)
{
    int rc = P(File_sync)(fh);
    pfile_t *f = serving(fh);
    if (rc != MPI_SUCCESS || !f)
        return rc;
    mpiio_depth++;
    int any = 1;
    if (!f->own_comm || P(Allreduce)(&f->wrote, &any, 1, H.int_, H.max, f->comm) != MPI_SUCCESS)
        any = 1;
    if (any)
        serve_stop(f);
    mpiio_depth--;
    return rc;
}

/* Atomic mode: every write is seen by every rank at once: no rank is served. */
EXPORT int MPI_File_set_atomicity(MPI_File fh, int flag)
{
    int rc = P(File_set_atomicity)(fh, flag);
    pfile_t *f = serving(fh);
    if (rc == MPI_SUCCESS && f && flag)
        serve_stop(f);
    return rc;
}

/* A new size or preallocated blocks change what the original holds: `rc` is the call's
 * answer, passed on after the file (if served) stops being served. */
static int stop_serving_after(MPI_File fh, int rc)
{
    pfile_t *f = serving(fh);
    if (f)
        serve_stop(f);
    return rc;
}

EXPORT int MPI_File_set_size(MPI_File fh, MPI_Offset size)
{
    return stop_serving_after(fh, P(File_set_size)(fh, size));
}

EXPORT int MPI_File_preallocate(MPI_File fh, MPI_Offset size)
{
    return stop_serving_after(fh, P(File_preallocate)(fh, size));
}

/* ---- the read and write families ---- */
#define AT_CALL(name, code, B)                                                             \
    EXPORT int MPI_File_##name(MPI_File fh, MPI_Offset off, B buf, int n, MPI_Datatype dt,   \
                               MPI_Status *st)                                             \
    {                                                                                      \
        if (LIKELY(!WATCHING()))                                                           \
            return P(File_##name)(fh, off, buf, n, dt, st);                                \
        return mpiio_io(code, fh, off, buf, n, dt, st, NULL);                              \
    }
#define PTR_CALL(name, code, B)                                                            \
    EXPORT int MPI_File_##name(MPI_File fh, B buf, int n, MPI_Datatype dt, MPI_Status *st)  \
    {                                                                                      \
        if (LIKELY(!WATCHING()))                                                           \
            return P(File_##name)(fh, buf, n, dt, st);                                     \
        return mpiio_io(code, fh, 0, buf, n, dt, st, NULL);                                \
    }
#define IAT_CALL(name, code, B)                                                            \
    EXPORT int MPI_File_##name(MPI_File fh, MPI_Offset off, B buf, int n, MPI_Datatype dt,   \
                               MPI_Request *req)                                           \
    {                                                                                      \
        if (LIKELY(!WATCHING()))                                                           \
            return P(File_##name)(fh, off, buf, n, dt, req);                               \
        return mpiio_io(code, fh, off, buf, n, dt, NULL, req);                             \
    }
#define IPTR_CALL(name, code, B)                                                           \
    EXPORT int MPI_File_##name(MPI_File fh, B buf, int n, MPI_Datatype dt, MPI_Request *req) \
    {                                                                                      \
        if (LIKELY(!WATCHING()))                                                           \
            return P(File_##name)(fh, buf, n, dt, req);                                    \
        return mpiio_io(code, fh, 0, buf, n, dt, NULL, req);                               \
    }
#define BEGIN_AT(name, code, B)                                                            \
    EXPORT int MPI_File_##name(MPI_File fh, MPI_Offset off, B buf, int n, MPI_Datatype dt)   \
    {                                                                                      \
        if (LIKELY(!WATCHING()))                                                           \
            return P(File_##name)(fh, off, buf, n, dt);                                    \
        return mpiio_io(code, fh, off, buf, n, dt, NULL, NULL);                            \
    }
#define BEGIN_PTR(name, code, B)                                                           \
    EXPORT int MPI_File_##name(MPI_File fh, B buf, int n, MPI_Datatype dt)                  \
    {                                                                                      \
        if (LIKELY(!WATCHING()))                                                           \
            return P(File_##name)(fh, buf, n, dt);                                         \
        return mpiio_io(code, fh, 0, buf, n, dt, NULL, NULL);                              \
    }
#define END_CALL(name, code, B)                                                            \
    EXPORT int MPI_File_##name(MPI_File fh, B buf, MPI_Status *st)                          \
    {                                                                                      \
        if (LIKELY(!WATCHING()))                                                           \
            return P(File_##name)(fh, buf, st);                                            \
        return mpiio_split_end(code, fh, buf, st);                                         \
    }

AT_CALL(read_at, C_READ_AT, void *)
AT_CALL(write_at, C_WRITE(C_READ_AT), const void *)
AT_CALL(read_at_all, C_READ_AT_ALL, void *)
AT_CALL(write_at_all, C_WRITE(C_READ_AT_ALL), const void *)
PTR_CALL(read, C_READ, void *)
PTR_CALL(write, C_WRITE(C_READ), const void *)
PTR_CALL(read_all, C_READ_ALL, void *)
PTR_CALL(write_all, C_WRITE(C_READ_ALL), const void *)
PTR_CALL(read_shared, C_READ_SHARED, void *)
PTR_CALL(write_shared, C_WRITE(C_READ_SHARED), const void *)
PTR_CALL(read_ordered, C_READ_ORDERED, void *)
PTR_CALL(write_ordered, C_WRITE(C_READ_ORDERED), const void *)
IAT_CALL(iread_at, C_IREAD_AT, void *)
IAT_CALL(iwrite_at, C_WRITE(C_IREAD_AT), const void *)
IAT_CALL(iread_at_all, C_IREAD_AT_ALL, void *)
IAT_CALL(iwrite_at_all, C_WRITE(C_IREAD_AT_ALL), const void *)
IPTR_CALL(iread, C_IREAD, void *)
IPTR_CALL(iwrite, C_WRITE(C_IREAD), const void *)
IPTR_CALL(iread_all, C_IREAD_ALL, void *)
IPTR_CALL(iwrite_all, C_WRITE(C_IREAD_ALL), const void *)
IPTR_CALL(iread_shared, C_IREAD_SHARED, void *)
IPTR_CALL(iwrite_shared, C_WRITE(C_IREAD_SHARED), const void *)
BEGIN_AT(read_at_all_begin, C_READ_AT_ALL_BEGIN, void *)
BEGIN_AT(write_at_all_begin, C_WRITE(C_READ_AT_ALL_BEGIN), const void *)
BEGIN_PTR(read_all_begin, C_READ_ALL_BEGIN, void *)
BEGIN_PTR(write_all_begin, C_WRITE(C_READ_ALL_BEGIN), const void *)
BEGIN_PTR(read_ordered_begin, C_READ_ORDERED_BEGIN, void *)
BEGIN_PTR(write_ordered_begin, C_WRITE(C_READ_ORDERED_BEGIN), const void *)
END_CALL(read_at_all_end, C_READ_AT_ALL_BEGIN, void *)
END_CALL(write_at_all_end, C_WRITE(C_READ_AT_ALL_BEGIN), const void *)
END_CALL(read_all_end, C_READ_ALL_BEGIN, void *)
END_CALL(write_all_end, C_WRITE(C_READ_ALL_BEGIN), const void *)
END_CALL(read_ordered_end, C_READ_ORDERED_BEGIN, void *)
END_CALL(write_ordered_end, C_WRITE(C_READ_ORDERED_BEGIN), const void *)
