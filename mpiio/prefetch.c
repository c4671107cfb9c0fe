/*
 * prefetch.c — pattern prefetching of a rank's independent reads
 * (PATIO_MPIIO_PREFETCH=POLICY: none, readahead, stride, markov, pattern; `patio run
 * --mpiio --prefetch POLICY` sets it), for original and reorganized files alike.
 *
 *  - A file opened read-only and not served from a reorganized container gets a stream
 *    of patio's prefetch engine (libpatio_prefetch.so): every independent
 *    explicit-offset read (read_at, iread_at) goes through it extent by extent, in the
 *    order the file view gives, so the policy sees the rank's own request stream and
 *    the engine's worker threads read its predicted next period ahead into the
 *    process's prefetch cache (PATIO_MPIIO_PREFETCH_BUDGET bytes, default 64 MiB).
 *    Reads at the individual file pointer and collective reads go to MPI (it keeps the
 *    pointer; every rank must take part in a collective call).
 *  - A served file gets the policy alone: each independent read of it is observed, and
 *    a read that misses what was read ahead is read from the container together with
 *    the policy's predicted next reads (up to PATIO_MPIIO_READAHEAD bytes, default
 *    8 MiB, and 256 reads ahead), in one patio_reorg_read — the reorganization made
 *    them contiguous, so one physical read answers many of the program's requests.
 *    The read-ahead bytes are kept per file until a miss replaces them. Collective
 *    reads are not read ahead (one call already holds the rank's whole pattern).
 *
 * A rank decides alone (independent reads need no agreement). A library that does not
 * load or a file the engine cannot open: one warning, the rank reads as without.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mpiio.h"

/* Most reads the policy is asked to look ahead on a served file. */
#define AHEAD_READS 256
/* Hints below this confidence are not read ahead. */
#define MIN_CONFIDENCE 0.55f

static const char *const F_NAMES[] = {
    "patio_prefetch_abi_version", "patio_prefetch_open", "patio_prefetch_read",
    "patio_prefetch_stats",       "patio_prefetch_close", "patio_policy_new",
    "patio_policy_observe",       "patio_policy_free",    NULL};
/* libpatio_prefetch.so's functions, in F_NAMES order. */
static union {
    void *fn[8];
    struct {
        __typeof__(patio_prefetch_abi_version) *abi;
        __typeof__(patio_prefetch_open) *open;
        __typeof__(patio_prefetch_read) *read;
        __typeof__(patio_prefetch_stats) *stats;
        __typeof__(patio_prefetch_close) *close;
        __typeof__(patio_policy_new) *policy_new;
        __typeof__(patio_policy_observe) *observe;
        __typeof__(patio_policy_free) *policy_free;
    };
} F;

static int load_prefetch(void)
{
    static int state;
    return mpiio_load_library("libpatio_prefetch.so", "PATIO_PREFETCH_LIB", F_NAMES, F.fn,
                              PATIO_PREFETCH_ABI_VERSION, "reads are not prefetched", &state);
}

static uint64_t env_bytes(const char *name, uint64_t fallback)
{
    const char *v = getenv(name);
    char *end;
    unsigned long long n = v && *v ? strtoull(v, &end, 10) : 0;
    return v && *v && !*end && n > 0 ? (uint64_t)n : fallback;
}

void prefetch_open(pfile_t *f, int amode)
{
    const char *policy = getenv("PATIO_MPIIO_PREFETCH");
    if (!policy || !*policy || (amode & (MPI_MODE_WRONLY | MPI_MODE_RDWR)) || !load_prefetch())
        return;
    char msg[512] = "";
    if (f->served) {
        if (F.policy_new(policy, &f->policy, msg, sizeof msg))
            mpiio_warn("%s: %s; reads are not read ahead", f->name, msg);
        f->ahead_limit = env_bytes("PATIO_MPIIO_READAHEAD", 8u << 20);
        return;
    }
    if (f->serving)
        return; /* served, but this rank's container failed: it reads the original */
    uint64_t budget = env_bytes("PATIO_MPIIO_PREFETCH_BUDGET", 0);
    if (F.open(f->path, policy, budget, &f->prefetch, msg, sizeof msg)) {
        mpiio_warn("%s; reads are not prefetched", msg);
        f->prefetch = NULL;
    }
}

/* Through the engine stream, extent by extent. */
static int engine_read(pfile_t *f, const extents_t *ext, void *dest, uint64_t *got, char *msg,
                       size_t msg_len)
{
    uint64_t done = 0;
    for (size_t i = 0; i < ext->n; i++) {
        uint64_t off = ext->v[2 * i], len = ext->v[2 * i + 1], n = 0;
        if (F.read(f->prefetch, off, (char *)dest + done, len, &n, msg, msg_len))
            return -1;
        done += n;
        if (n < len)
            break; /* end of file (a view's extents only go forward) */
    }
    *got = done;
    return 0;
}

/* Where the read-ahead pieces hold [off, off + len), or NULL. */
static const char *ahead_find(const pfile_t *f, uint64_t off, uint64_t len)
{
    uint64_t at = 0;
    for (size_t i = 0; i < f->ahead_n; i++) {
        uint64_t o = f->ahead[2 * i], l = f->ahead[2 * i + 1];
        if (o <= off && off + len <= o + l)
            return f->ahead_buf + at + (off - o);
        at += l;
    }
    return NULL;
}

static void ahead_drop(pfile_t *f)
{
    free(f->ahead);
    free(f->ahead_buf);
    f->ahead = NULL;
    f->ahead_buf = NULL;
    f->ahead_n = 0;
}

static int push(uint64_t **v, size_t *n, size_t *cap, uint64_t off, uint64_t len)
{
    if (*n == *cap) {
        size_t c = *cap ? 2 * *cap : 64;
        uint64_t *w = realloc(*v, 2 * c * sizeof **v);
        if (!w)
            return -1;
        *v = w;
        *cap = c;
    }
    (*v)[2 * *n] = off;
    (*v)[2 * *n + 1] = len;
    (*n)++;
    return 0;
}

/* A served file's read with read-ahead (see the file comment). */
static int ahead_read(pfile_t *f, const extents_t *ext, void *dest, uint64_t *got, char *msg,
                      size_t msg_len)
{
    uint64_t size = serve_size(f), limit = f->ahead_limit;
    uint64_t *hints = malloc(2 * AHEAD_READS * sizeof *hints), *need = NULL, *place = NULL;
    size_t nh = 0, nn = 0, cn = 0, pn = 0, pc = 0;
    uint64_t done = 0, need_bytes = 0;
    int rc = -1;
    if (!hints) {
        snprintf(msg, msg_len, "out of memory");
        return -1;
    }
    /* Hits are copied now; misses are collected with where they go in `dest`. */
    for (size_t i = 0; i < ext->n; i++) {
        uint64_t off = ext->v[2 * i], len = ext->v[2 * i + 1];
        len = off >= size ? 0 : (len < size - off ? len : size - off);
        size_t k = F.observe(f->policy, off, len, AHEAD_READS, MIN_CONFIDENCE, hints, AHEAD_READS);
        if (k)
            nh = k;
        const char *hit = len ? ahead_find(f, off, len) : NULL;
        if (hit) {
            memcpy((char *)dest + done, hit, len);
            f->prefetch_used_bytes += len;
        } else if (len && (push(&need, &nn, &cn, off, len) || push(&place, &pn, &pc, done, len))) {
            snprintf(msg, msg_len, "out of memory");
            goto out;
        }
        need_bytes += hit ? 0 : len;
        done += len;
    }
    if (nn) {
        /* The misses, then the predicted next reads not already held, within the limit. */
        size_t misses = nn;
        uint64_t ahead_bytes = 0;
        for (size_t i = 0; i < nh; i++) {
            uint64_t off = hints[2 * i], len = hints[2 * i + 1];
            len = off >= size ? 0 : (len < size - off ? len : size - off);
            if (!len || ahead_bytes + len > limit)
                continue;
            if (push(&need, &nn, &cn, off, len)) {
                snprintf(msg, msg_len, "out of memory");
                goto out;
            }
            ahead_bytes += len;
        }
        char *all = malloc(need_bytes + ahead_bytes + 1);
        uint64_t read = 0;
        if (!all) {
            snprintf(msg, msg_len, "out of memory");
            goto out;
        }
        if (serve_extents(f, need, nn, all, &read, msg, msg_len)) {
            free(all);
            goto out;
        }
        uint64_t at = 0;
        for (size_t i = 0; i < misses; i++) {
            memcpy((char *)dest + place[2 * i], all + at, need[2 * i + 1]);
            at += need[2 * i + 1];
        }
        /* The read-ahead pieces become the file's: moved to the front of `all`. */
        ahead_drop(f);
        size_t extra = nn - misses;
        if (extra) {
            f->ahead = malloc(2 * extra * sizeof *f->ahead);
            if (f->ahead) {
                memcpy(f->ahead, need + 2 * misses, 2 * extra * sizeof *f->ahead);
                memmove(all, all + need_bytes, ahead_bytes);
                f->ahead_buf = all;
                f->ahead_n = extra;
                f->prefetched_bytes += ahead_bytes;
                all = NULL;
            }
        }
        free(all);
    }
    *got = done;
    rc = 0;
out:
    free(hints);
    free(need);
    free(place);
    return rc;
}

int prefetch_read(pfile_t *f, const extents_t *ext, void *dest, uint64_t *got, char *msg,
                  size_t msg_len)
{
    if (f->prefetch)
        return engine_read(f, ext, dest, got, msg, msg_len);
    if (f->policy && f->independent)
        return ahead_read(f, ext, dest, got, msg, msg_len);
    return serve_extents(f, ext->v, ext->n, dest, got, msg, msg_len);
}

void prefetch_close(pfile_t *f)
{
    if (f->prefetch) {
        PatioPrefetchStats s;
        F.stats(f->prefetch, &s);
        f->prefetched_bytes = s.prefetched_bytes;
        f->prefetch_used_bytes = s.cache_bytes;
        f->physical_reads = s.backend_requests;
        F.close(f->prefetch);
        f->prefetch = NULL;
    }
    if (f->policy) {
        F.policy_free(f->policy);
        f->policy = NULL;
    }
    ahead_drop(f);
}
