/*
 * shared.c — the shared file pointer of a served file, kept by the layer.
 *
 * While a file is served, the layer answers reads from the container and never moves
 * MPI's own file pointers, so it keeps them itself: the individual pointer in the
 * file's state (io.c), the shared one here, as one 64-bit counter of etypes in an MPI
 * window on rank 0 of the file's communicator (a duplicate the layer owns). Every rank
 * holds a passive-target epoch on the window (MPI_Win_lock_all) from the open to the
 * close; a shared-pointer access is one atomic MPI_Fetch_and_op at rank 0 followed by a
 * flush, as MPI implementations' own shared-pointer components do with their window or
 * shared segment.
 *
 * Making a window is collective and not cheap (MPI_Win_allocate: a shared segment and
 * synchronisation, 0.1-0.3 s for 4-64 ranks on two oversubscribed cores), so the layer
 * takes the shared pointer over only when a program needs it collectively: at its first
 * ordered call or seek_shared on a served file, when every rank is in the call and no
 * shared-pointer access is under way. Until then shared-pointer calls go to MPI (reads of
 * the original, same bytes), and the window starts at the position MPI's pointer reached:
 * the etypes those calls asked for, summed over the ranks (MPI advances the pointer by
 * what is requested).
 * A program that reads only with read_shared is not served (it never calls collectively
 * on the shared pointer); its reads read the original.
 *
 * Errors are returned, not fatal, on the layer's communicator and window: when the MPI
 * cannot make the window (no one-sided component for the job's transport), every rank
 * knows (one more allreduce) and shared-pointer calls keep passing through to MPI.
 */
#include <string.h>

#include "mpiio.h"

int shared_take(pfile_t *f)
{
    if (f->shared_tried || !f->own_comm)
        return f->shared_ok;
    f->shared_tried = 1;
    /* MPI's shared pointer: what every rank's shared-pointer calls asked for since the
     * view was set (no ordered call or seek_shared moved it: either would have made the
     * layer take over), summed — MPI's own query is not relied on */
    long long asked = (long long)f->shared_passed, at = 0;
    int ok = P(Comm_set_errhandler)(f->comm, H.errors_return) == MPI_SUCCESS &&
             P(Allreduce)(&asked, &at, 1, H.long_long, H.sum, f->comm) == MPI_SUCCESS;
    int64_t *mem = NULL;
    MPI_Aint bytes = f->rank == 0 ? (MPI_Aint)sizeof(int64_t) : 0;
    int made = ok && P(Win_allocate)(bytes, (int)sizeof(int64_t), H.info_null, f->comm, &mem,
                                     &f->shared_win) == MPI_SUCCESS;
    if (made) {
        P(Win_set_errhandler)(f->shared_win, H.errors_return);
        if (f->rank == 0)
            *mem = (int64_t)at;
        ok = P(Win_lock_all)(MPI_MODE_NOCHECK, f->shared_win) == MPI_SUCCESS;
        if (ok && f->rank == 0)
            ok = P(Win_sync)(f->shared_win) == MPI_SUCCESS;
    }
    int mine = made && ok, all = 0;
    if (P(Allreduce)(&mine, &all, 1, H.int_, H.min, f->comm) != MPI_SUCCESS)
        all = 0;
    if (all) {
        f->shared_mem = mem;
        f->shared_ok = 1;
        return 1;
    }
    if (made) {
        if (ok)
            P(Win_unlock_all)(f->shared_win);
        P(Win_free)(&f->shared_win);
    }
    if (f->rank == 0 && !mine)
        mpiio_warn("%s: this MPI cannot make a one-sided window; shared-pointer and ordered "
                   "reads are read from the original", f->name);
    return 0;
}

void shared_close(pfile_t *f)
{
    if (!f->shared_ok)
        return;
    P(Win_unlock_all)(f->shared_win);
    P(Win_free)(&f->shared_win);
    f->shared_ok = 0;
    f->shared_mem = NULL;
}

/* One atomic operation on the counter: `*result` gets its value before `op` with
 * `operand`. */
static int atomic_op(pfile_t *f, int64_t operand, MPI_Op op, MPI_Offset *result)
{
    long long in = (long long)operand, out = 0;
    int rc = P(Fetch_and_op)(&in, &out, H.long_long, 0, 0, op, f->shared_win);
    if (rc == MPI_SUCCESS)
        rc = P(Win_flush)(0, f->shared_win);
    *result = (MPI_Offset)out;
    return rc;
}

int shared_add(pfile_t *f, int64_t etypes, MPI_Offset *before)
{
    return atomic_op(f, etypes, H.sum, before);
}

int shared_get(pfile_t *f, MPI_Offset *at) { return atomic_op(f, 0, H.no_op, at); }

int shared_set(pfile_t *f, MPI_Offset at)
{
    MPI_Offset old;
    return atomic_op(f, (int64_t)at, H.replace, &old);
}

int shared_ordered(pfile_t *f, int64_t etypes, MPI_Offset *at)
{
    /* this rank's place among the ranks' requests, and all of them: one exscan and one
     * allreduce; rank 0 moves the pointer past all and tells the others where it was */
    long long mine = (long long)etypes, below = 0, total = 0, base = 0;
    int rc = P(Exscan)(&mine, &below, 1, H.long_long, H.sum, f->comm);
    if (rc == MPI_SUCCESS)
        rc = P(Allreduce)(&mine, &total, 1, H.long_long, H.sum, f->comm);
    if (f->rank == 0)
        below = 0; /* MPI_Exscan leaves rank 0's result undefined */
    int got = MPI_SUCCESS;
    if (rc == MPI_SUCCESS && f->rank == 0) {
        MPI_Offset old = 0;
        got = shared_add(f, (int64_t)total, &old);
        base = got == MPI_SUCCESS ? (long long)old : -1;
    }
    if (rc == MPI_SUCCESS)
        rc = P(Bcast)(&base, 1, H.long_long, 0, f->comm);
    if (rc == MPI_SUCCESS && base < 0)
        rc = got != MPI_SUCCESS ? got : MPI_ERR_OTHER;
    *at = (MPI_Offset)(base + below);
    return rc;
}
