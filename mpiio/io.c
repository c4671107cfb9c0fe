/*
 * io.c — the read and write families of MPI-IO on watched files: served from the
 * reorganized container, or passed through to MPI, and traced as MPIIO records.
 *
 * Semantics decided here:
 *  - While a file is served the layer keeps its file pointers (MPI's are never moved):
 *    the individual one here, the shared one in shared.c. A pointer advances by the
 *    etypes requested (a read cut short at the end of the file included), as Open MPI's
 *    does. Every call then has an explicit position: reads are served there, writes are
 *    issued to MPI as the explicit-offset call of the same kind (collective stays
 *    collective, nonblocking stays nonblocking).
 *  - Collective (_all, ordered) reads need no exchange: each rank reads its own extents.
 *  - Writes of a served file go to the original (the one copy every program reads; its
 *    new version makes the container stale for the next open). MPI's consistency rules
 *    decide who must see them: the writing rank at once (its reads then read the
 *    original), the other ranks after MPI_File_sync (interpose.c: after a sync at which
 *    any rank had written, no rank is served), in atomic mode at once (no rank is served
 *    once atomicity is set), and the next opener (the container is stale then).
 *  - Shared-pointer and ordered calls are served at the layer's shared pointer once the
 *    layer took it over (shared.c: at the first ordered call or seek_shared); before,
 *    or when the MPI could not make its window, they pass through to the original.
 *  - Nonblocking reads of a served file are served at the call and return a completed
 *    generalized request; split collectives are served at begin, their status is
 *    given at end.
 *  - A served read that fails (the container damaged under the program) warns once and
 *    closes the container; that rank's later reads of the file read the original with
 *    the independent explicit-offset call at the layer's pointer (never a collective
 *    one: the other ranks may still be served).
 *  - Records of blocking calls carry the bytes moved; of nonblocking and split calls
 *    (passed through), the bytes requested, timed at the call.
 *  - Shared-pointer positions of calls passed through are read just before the call
 *    (another rank may move the pointer in between); ordered calls add the bytes of
 *    lower ranks (MPI_Exscan).
 */
#include <stdlib.h>
#include <string.h>

#include "mpiio.h"

enum { AT, INDIV, SHARED, ORDERED };

static int mode_of(int c)
{
    switch (c) {
    case C_READ_AT: case C_READ_AT_ALL: case C_IREAD_AT: case C_IREAD_AT_ALL:
    case C_READ_AT_ALL_BEGIN:
        return AT;
    case C_READ_SHARED: case C_IREAD_SHARED:
        return SHARED;
    case C_READ_ORDERED: case C_READ_ORDERED_BEGIN:
        return ORDERED;
    default:
        return INDIV;
    }
}

static int is_nonblocking(int c) { return c >= C_IREAD_AT && c <= C_IREAD_SHARED; }
static int is_begin(int c) { return c >= C_READ_AT_ALL_BEGIN && c <= C_READ_ORDERED_BEGIN; }
static int is_collective(int c)
{
    return c == C_READ_AT_ALL || c == C_READ_ALL || c == C_IREAD_AT_ALL || c == C_IREAD_ALL ||
           c == C_READ_ORDERED || is_begin(c);
}

static int real_call(int call, MPI_File fh, MPI_Offset off, const void *cbuf, int n,
                     MPI_Datatype dt, MPI_Status *st, MPI_Request *req)
{
    void *buf = (void *)cbuf;
    switch (call) {
    case C_READ_AT: return P(File_read_at)(fh, off, buf, n, dt, st);
    case C_READ_AT_ALL: return P(File_read_at_all)(fh, off, buf, n, dt, st);
    case C_READ: return P(File_read)(fh, buf, n, dt, st);
    case C_READ_ALL: return P(File_read_all)(fh, buf, n, dt, st);
    case C_READ_SHARED: return P(File_read_shared)(fh, buf, n, dt, st);
    case C_READ_ORDERED: return P(File_read_ordered)(fh, buf, n, dt, st);
    case C_IREAD_AT: return P(File_iread_at)(fh, off, buf, n, dt, req);
    case C_IREAD_AT_ALL: return P(File_iread_at_all)(fh, off, buf, n, dt, req);
    case C_IREAD: return P(File_iread)(fh, buf, n, dt, req);
    case C_IREAD_ALL: return P(File_iread_all)(fh, buf, n, dt, req);
    case C_IREAD_SHARED: return P(File_iread_shared)(fh, buf, n, dt, req);
    case C_READ_AT_ALL_BEGIN: return P(File_read_at_all_begin)(fh, off, buf, n, dt);
    case C_READ_ALL_BEGIN: return P(File_read_all_begin)(fh, buf, n, dt);
    case C_READ_ORDERED_BEGIN: return P(File_read_ordered_begin)(fh, buf, n, dt);
    case C_WRITE(C_READ_AT): return P(File_write_at)(fh, off, cbuf, n, dt, st);
    case C_WRITE(C_READ_AT_ALL): return P(File_write_at_all)(fh, off, cbuf, n, dt, st);
    case C_WRITE(C_READ): return P(File_write)(fh, cbuf, n, dt, st);
    case C_WRITE(C_READ_ALL): return P(File_write_all)(fh, cbuf, n, dt, st);
    case C_WRITE(C_READ_SHARED): return P(File_write_shared)(fh, cbuf, n, dt, st);
    case C_WRITE(C_READ_ORDERED): return P(File_write_ordered)(fh, cbuf, n, dt, st);
    case C_WRITE(C_IREAD_AT): return P(File_iwrite_at)(fh, off, cbuf, n, dt, req);
    case C_WRITE(C_IREAD_AT_ALL): return P(File_iwrite_at_all)(fh, off, cbuf, n, dt, req);
    case C_WRITE(C_IREAD): return P(File_iwrite)(fh, cbuf, n, dt, req);
    case C_WRITE(C_IREAD_ALL): return P(File_iwrite_all)(fh, cbuf, n, dt, req);
    case C_WRITE(C_IREAD_SHARED): return P(File_iwrite_shared)(fh, cbuf, n, dt, req);
    case C_WRITE(C_READ_AT_ALL_BEGIN): return P(File_write_at_all_begin)(fh, off, cbuf, n, dt);
    case C_WRITE(C_READ_ALL_BEGIN): return P(File_write_all_begin)(fh, cbuf, n, dt);
    case C_WRITE(C_READ_ORDERED_BEGIN): return P(File_write_ordered_begin)(fh, cbuf, n, dt);
    default: return MPI_ERR_INTERN;
    }
}

static uint64_t requested(MPI_Datatype dt, int count)
{
    MPI_Count size = 0;
    if (count <= 0 || P(Type_size_x)(dt, &size) != MPI_SUCCESS || size < 0)
        return 0;
    return (uint64_t)size * (uint64_t)count;
}

/* A served read at view etype `at`; 0 when answered, -1 when the caller must read the
 * original. */
static int served(pfile_t *f, int base, MPI_Offset at, void *buf, int count, MPI_Datatype dt,
                  MPI_Status *st, MPI_Request *req, int *rc, turns_t *turns)
{
    extents_t e;
    memset(&e, 0, sizeof e);
    uint64_t got = 0, t0 = mpiio_now_ns();
    if (serve_read(f, (uint64_t)at * (uint64_t)f->view.etype_size, buf, count, dt, &got, &e,
                   turns)) {
        extents_free(&e);
        return -1;
    }
    trace_extents(f, 0, base, &e, got, t0, mpiio_now_ns());
    extents_free(&e);
    if (is_nonblocking(base)) {
        *rc = completed_request(got, req);
    } else if (is_begin(base)) {
        f->split_bytes = got;
        f->split_served = 1;
        *rc = MPI_SUCCESS;
    } else {
        status_set_bytes(st, got);
        *rc = MPI_SUCCESS;
    }
    return 0;
}

/* A read of a served file at view etype `at` that the container does not answer (its
 * serving stopped): the original, with the independent explicit-offset call, whatever
 * the call was, so that no rank enters a collective the others (still served) do not. */
static int fallback(pfile_t *f, int base, MPI_Offset at, void *buf, int count, MPI_Datatype dt,
                    MPI_Status *st, MPI_Request *req)
{
    MPI_Status local;
    uint64_t t0 = mpiio_now_ns();
    int rc = real_call(C_READ_AT, f->fh, at, buf, count, dt, &local, NULL);
    uint64_t t1 = mpiio_now_ns();
    MPI_Count got = 0;
    if (rc != MPI_SUCCESS || P(Get_elements_x)(&local, H.byte, &got) != MPI_SUCCESS ||
        got == MPI_UNDEFINED)
        got = 0;
    f->passed_calls++;
    extents_t e;
    memset(&e, 0, sizeof e);
    if (view_extents(&f->view, (uint64_t)at * (uint64_t)f->view.etype_size, (uint64_t)got, &e) == 0)
        trace_extents(f, 0, base, &e, (uint64_t)got, t0, t1);
    extents_free(&e);
    if (rc != MPI_SUCCESS)
        return rc;
    if (is_nonblocking(base))
        return completed_request((uint64_t)got, req);
    if (is_begin(base)) {
        f->split_bytes = (uint64_t)got;
        f->split_served = 1;
    } else if (st != MPI_STATUS_IGNORE) {
        *st = local;
    }
    return MPI_SUCCESS;
}

/* Records a call MPI answered as MPIIO records from view data byte `b`: the bytes its
 * status says it moved (`st`, a blocking call's), else the `want` bytes requested. */
static void record_moved(pfile_t *f, int write, int call, uint64_t b, uint64_t want,
                         MPI_Status *st, uint64_t t0, uint64_t t1)
{
    uint64_t moved = want;
    MPI_Count n;
    if (st && P(Get_elements_x)(st, H.byte, &n) == MPI_SUCCESS && n != MPI_UNDEFINED)
        moved = (uint64_t)n;
    extents_t e;
    memset(&e, 0, sizeof e);
    if (view_extents(&f->view, b, moved, &e) == 0)
        trace_extents(f, write, call, &e, moved, t0, t1);
    extents_free(&e);
}

/* The explicit-offset call of the same kind as `base` (collective, nonblocking, split). */
static int explicit_of(int base)
{
    switch (base) {
    case C_READ_AT: case C_READ: case C_READ_SHARED:
        return C_READ_AT;
    case C_READ_AT_ALL: case C_READ_ALL: case C_READ_ORDERED:
        return C_READ_AT_ALL;
    case C_IREAD_AT: case C_IREAD: case C_IREAD_SHARED:
        return C_IREAD_AT;
    case C_IREAD_AT_ALL: case C_IREAD_ALL:
        return C_IREAD_AT_ALL;
    default:
        return C_READ_AT_ALL_BEGIN;
    }
}

/* A write of a served file at view etype `at`: to the original, as the explicit-offset
 * call of its kind; this rank's reads of the file read the original from now on. */
static int kept_write(pfile_t *f, int call, MPI_Offset at, const void *buf, int count,
                      MPI_Datatype dt, MPI_Status *st, MPI_Request *req)
{
    int base = call - 20, real = C_WRITE(explicit_of(base));
    f->wrote = 1;
    serve_stop(f);
    f->passed_calls++;
    MPI_Status local;
    int blocking = !is_nonblocking(base) && !is_begin(base);
    MPI_Status *use = blocking && st == MPI_STATUS_IGNORE ? &local : st;
    uint64_t t0 = mpiio_now_ns();
    int rc = real_call(real, f->fh, at, buf, count, dt, use, req);
    uint64_t t1 = mpiio_now_ns();
    if (rc != MPI_SUCCESS)
        return rc;
    if (is_begin(base))
        f->split_real = real;
    if (f->trace)
        record_moved(f, 1, call, (uint64_t)at * (uint64_t)f->view.etype_size,
                     requested(dt, count), blocking ? use : NULL, t0, t1);
    return rc;
}

/* A call on a served file whose position the layer keeps (explicit offset, individual
 * pointer, or the shared pointer when shared.c keeps it). */
static int kept(pfile_t *f, int call, MPI_Offset off, const void *buf, int count,
                MPI_Datatype dt, MPI_Status *st, MPI_Request *req)
{
    int write = call >= C_WRITE_AT, base = write ? call - 20 : call, rc = MPI_SUCCESS;
    int64_t etypes = (int64_t)(requested(dt, count) / (uint64_t)f->view.etype_size);
    MPI_Offset at = off;
    switch (mode_of(base)) {
    case INDIV: /* by the data requested, as Open MPI does, even when cut short */
        at = f->pos;
        f->pos += etypes;
        break;
    case SHARED:
        rc = shared_add(f, etypes, &at);
        break;
    case ORDERED:
        rc = shared_ordered(f, etypes, &at);
        break;
    }
    if (rc != MPI_SUCCESS)
        return rc;
    if (write)
        return kept_write(f, call, at, buf, count, dt, st, req);
    /* a collective read of an ordered file: every rank takes its turns (turns.c), also
     * one whose serving stopped (it reads the original and hands on at once) */
    turns_t turns, *use = NULL;
    if (f->ordered && f->own_comm && is_collective(base)) {
        turns_init(&turns, f->comm);
        use = &turns;
    }
    if (!f->served || served(f, base, at, (void *)buf, count, dt, st, req, &rc, use) != 0)
        rc = fallback(f, base, at, (void *)buf, count, dt, st, req);
    if (use)
        turns_finish(use);
    return rc;
}

/* View data byte where a passed-through call starts; -1 when unknown. An ordered call
 * takes part in the exscan on every rank whatever else fails (it is collective). */
static int start_of(pfile_t *f, int base, MPI_Offset off, uint64_t want, uint64_t *b)
{
    MPI_Offset at = off;
    int mode = mode_of(base), ok = 1;
    long long below = 0;
    if (mode == ORDERED) {
        long long mine = (long long)(want / (uint64_t)f->view.etype_size);
        int rank = 0;
        ok = f->own_comm &&
             P(Exscan)(&mine, &below, 1, H.long_long, H.sum, f->comm) == MPI_SUCCESS &&
             P(Comm_rank)(f->comm, &rank) == MPI_SUCCESS;
        if (rank == 0)
            below = 0; /* MPI_Exscan leaves rank 0's result undefined */
    }
    if (mode == INDIV && P(File_get_position)(f->fh, &at) != MPI_SUCCESS)
        ok = 0;
    if ((mode == SHARED || mode == ORDERED) &&
        P(File_get_position_shared)(f->fh, &at) != MPI_SUCCESS)
        ok = 0;
    *b = (uint64_t)(at + below) * (uint64_t)f->view.etype_size;
    return ok && f->view_ok ? 0 : -1;
}

int mpiio_io(int call, MPI_File fh, MPI_Offset off, const void *buf, int count, MPI_Datatype dt,
             MPI_Status *st, MPI_Request *req)
{
    pfile_t *f = mpiio_depth ? NULL : files_find(fh);
    if (!f)
        return real_call(call, fh, off, buf, count, dt, st, req);
    mpiio_depth++;
    int write = call >= C_WRITE_AT, base = write ? call - 20 : call, rc = MPI_SUCCESS;
    int mode = mode_of(base);
    /* served files: explicit offsets and the individual pointer (the layer keeps it);
     * files prefetched but not served: independent explicit-offset reads (MPI keeps the
     * pointer, and every rank takes part in collective calls whatever its prefetching) */
    f->independent = !is_collective(base);
    if (f->serving && mode == ORDERED)
        shared_take(f); /* collective: the layer may take the shared pointer over here */
    if (f->serving && (mode == AT || mode == INDIV || f->shared_ok)) {
        rc = kept(f, call, off, buf, count, dt, st, req);
        mpiio_depth--;
        return rc;
    }
    /* a file prefetched but not served: independent explicit-offset reads (MPI keeps the
     * pointers, and every rank takes part in collective calls whatever its prefetching) */
    if (!write && f->prefetch && mode == AT && f->independent) {
        if (served(f, base, off, (void *)buf, count, dt, st, req, &rc, NULL) != 0)
            rc = fallback(f, base, off, (void *)buf, count, dt, st, req);
        mpiio_depth--;
        return rc;
    }
    f->passed_calls++;
    if (f->serving && mode == SHARED) /* MPI's shared pointer moves by what is asked */
        f->shared_passed += (int64_t)(requested(dt, count) / (uint64_t)f->view.etype_size);
    if (!f->trace || (!f->view_ok && mode != ORDERED)) {
        rc = real_call(call, fh, off, buf, count, dt, st, req);
        mpiio_depth--;
        return rc;
    }
    uint64_t want = requested(dt, count), b = 0;
    int placed = start_of(f, base, off, want, &b) == 0;
    MPI_Status local;
    int blocking = !is_nonblocking(base) && !is_begin(base);
    MPI_Status *use = blocking && st == MPI_STATUS_IGNORE ? &local : st;
    uint64_t t0 = mpiio_now_ns();
    rc = real_call(call, fh, off, buf, count, dt, use, req);
    uint64_t t1 = mpiio_now_ns();
    if (rc == MPI_SUCCESS && placed)
        record_moved(f, write, call, b, want, blocking ? use : NULL, t0, t1);
    mpiio_depth--;
    return rc;
}

int mpiio_split_end(int call, MPI_File fh, const void *buf, MPI_Status *st)
{
    pfile_t *f = mpiio_depth ? NULL : files_find(fh);
    if (f && f->split_served) {
        f->split_served = 0;
        status_set_bytes(st, f->split_bytes);
        return MPI_SUCCESS;
    }
    if (f && f->split_real) { /* a served file's write, begun at an explicit offset */
        call = f->split_real;
        f->split_real = 0;
    }
    void *b = (void *)buf;
    switch (call) {
    case C_READ_AT_ALL_BEGIN: return P(File_read_at_all_end)(fh, b, st);
    case C_READ_ALL_BEGIN: return P(File_read_all_end)(fh, b, st);
    case C_READ_ORDERED_BEGIN: return P(File_read_ordered_end)(fh, b, st);
    case C_WRITE(C_READ_AT_ALL_BEGIN): return P(File_write_at_all_end)(fh, buf, st);
    case C_WRITE(C_READ_ALL_BEGIN): return P(File_write_all_end)(fh, buf, st);
    case C_WRITE(C_READ_ORDERED_BEGIN): return P(File_write_ordered_end)(fh, buf, st);
    default: return MPI_ERR_INTERN;
    }
}
