/*
 * turns.c — ordered collective reads of served files (PATIO_MPIIO_ORDER=1).
 *
 * In a collective read of a served file the ranks' physical reads of the container,
 * of all ranks together, are issued one at a time in container order (data log, then
 * offset; ties by rank): each rank learns where every rank's reads lie (an allgather of
 * the places patio_reorg_read_paced reports before reading), and a read waits for the
 * read before it (another rank's: a zero-byte message on the file's communicator) and
 * hands on to the one after it. On a striped disk where concurrent streams seek between
 * each other, a reorganized file whose ranks' patterns follow each other is then read as
 * one sequential stream, with no two-phase exchange.
 *
 * Every rank of the file takes part in every collective read's turns, whatever happens
 * on it: turns_finish joins the allgather with no reads when this rank did not schedule
 * (its serving stopped, it reads ahead, it failed before reading) and hands on every turn
 * it did not (a read failed midway), so no rank waits forever.
 */
#include <stdlib.h>
#include <string.h>

#include "mpiio.h"

#define TURN_TAG 0x7a71

typedef struct {
    uint64_t chunk, start;
    int rank;
    size_t i;
} place_t;

static int by_place(const void *a, const void *b)
{
    const place_t *x = a, *y = b;
    if (x->chunk != y->chunk)
        return x->chunk < y->chunk ? -1 : 1;
    if (x->start != y->start)
        return x->start < y->start ? -1 : 1;
    if (x->rank != y->rank)
        return x->rank < y->rank ? -1 : 1;
    return x->i < y->i ? -1 : x->i > y->i;
}

void turns_init(turns_t *t, MPI_Comm comm)
{
    memset(t, 0, sizeof *t);
    t->comm = comm;
}

static int turns_schedule(void *ctx, const PatioReorgPlace *places, size_t n)
{
    turns_t *t = ctx;
    t->scheduled = 1;
    int size = 0, rank = 0, mine = (int)n;
    if (P(Comm_size)(t->comm, &size) != MPI_SUCCESS || P(Comm_rank)(t->comm, &rank) != MPI_SUCCESS)
        return -1;
    int *counts = calloc((size_t)size, sizeof *counts), *displs = calloc((size_t)size, sizeof *displs);
    long long *own = malloc((2 * n + 1) * sizeof *own);
    int rc = counts && displs && own ? 0 : -1;
    /* every rank takes part in both collectives, whatever failed on it */
    if (P(Allgather)(&mine, 1, H.int_, counts, 1, H.int_, t->comm) != MPI_SUCCESS)
        rc = -1;
    size_t total = 0;
    for (int r = 0; counts && displs && r < size; r++) {
        displs[r] = (int)(2 * total);
        total += (size_t)counts[r];
        counts[r] *= 2;
    }
    for (size_t i = 0; own && i < n; i++) {
        own[2 * i] = (long long)places[i].chunk;
        own[2 * i + 1] = (long long)places[i].start;
    }
    long long *all = malloc((2 * total + 1) * sizeof *all);
    place_t *order = malloc((total + 1) * sizeof *order);
    if (!all || !order)
        rc = -1;
    if (P(Allgatherv)(own, 2 * mine, H.long_long, all, counts, displs, H.long_long, t->comm) !=
        MPI_SUCCESS)
        rc = -1;
    if (rc == 0) {
        size_t k = 0;
        for (int r = 0; r < size; r++)
            for (int i = 0; i < counts[r] / 2; i++, k++)
                order[k] = (place_t){(uint64_t)all[displs[r] + 2 * i],
                                     (uint64_t)all[displs[r] + 2 * i + 1], r, (size_t)i};
        qsort(order, total, sizeof *order, by_place);
        t->n = n;
        t->prev = malloc((n + 1) * sizeof *t->prev);
        t->next = malloc((n + 1) * sizeof *t->next);
        t->done = calloc(2 * n + 1, 1);
        if (!t->prev || !t->next || !t->done)
            rc = -1;
        for (size_t k2 = 0; rc == 0 && k2 < total; k2++) {
            if (order[k2].rank != rank)
                continue;
            size_t i = order[k2].i;
            int before = k2 > 0 ? order[k2 - 1].rank : -1, after = k2 + 1 < total ? order[k2 + 1].rank : -1;
            t->prev[i] = before == rank ? -1 : before;
            t->next[i] = after == rank ? -1 : after;
        }
    }
    free(counts);
    free(displs);
    free(own);
    free(all);
    free(order);
    if (rc != 0)
        t->n = 0; /* out of memory or an MPI error: this rank reads on without turns */
    return rc == 0 ? 0 : -1;
}

static int turns_pace(void *ctx, size_t i, int after)
{
    turns_t *t = ctx;
    if (i >= t->n)
        return -1;
    t->done[2 * i + (after ? 1 : 0)] = 1;
    if (!after && t->prev[i] >= 0)
        return P(Recv)(NULL, 0, H.byte, t->prev[i], TURN_TAG, t->comm, MPI_STATUS_IGNORE) ==
                       MPI_SUCCESS
                   ? 0
                   : -1;
    if (after && t->next[i] >= 0)
        return P(Send)(NULL, 0, H.byte, t->next[i], TURN_TAG, t->comm) == MPI_SUCCESS ? 0 : -1;
    return 0;
}

PatioReorgPacer turns_pacer(turns_t *t)
{
    return (PatioReorgPacer){t, turns_schedule, turns_pace};
}

void turns_finish(turns_t *t)
{
    if (!t->scheduled)
        turns_schedule(t, NULL, 0);
    for (size_t i = 0; i < t->n; i++) {
        if (!t->done[2 * i])
            turns_pace(t, i, 0);
        if (!t->done[2 * i + 1])
            turns_pace(t, i, 1);
    }
    free(t->prev);
    free(t->next);
    free(t->done);
    memset(t, 0, sizeof *t);
}
