/*
 * patio_prefetch.h — the C ABI of patio's prefetch engine (libpatio_prefetch.so).
 *
 * A front end inside a user's process (the MPI-IO layer libpatio_mpiio.so) opens a file
 * here with a prediction policy and reads it through the process's one prefetch engine:
 * each read is answered from prefetched data when the policy saw it coming, and the
 * policy's next predictions are read ahead by the engine's worker threads into one
 * byte-budgeted cache shared by every open file. Reads return exactly the file's bytes
 * (short at end of file); prefetched data is dropped when the handle closes.
 *
 * Thread-safe: reads of one handle are serialised; distinct handles read concurrently.
 * No function panics across the boundary. Messages are NUL-terminated and truncated to
 * the caller's buffer.
 */
#ifndef PATIO_PREFETCH_H
#define PATIO_PREFETCH_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The ABI version this header describes; compare with patio_prefetch_abi_version(). */
#define PATIO_PREFETCH_ABI_VERSION 1u

typedef struct PatioPrefetchFile PatioPrefetchFile;

/* What a handle's reads saw. */
typedef struct {
    uint64_t requests;         /* reads */
    uint64_t hits;             /* reads answered wholly from prefetched data */
    uint64_t read_bytes;       /* bytes returned */
    uint64_t cache_bytes;      /* of them, bytes that came from prefetched data */
    uint64_t prefetched_bytes; /* bytes the engine read ahead */
    uint64_t wasted_bytes;     /* prefetched bytes never used */
    uint64_t backend_requests; /* reads issued to the file (demand and prefetch) */
} PatioPrefetchStats;

uint32_t patio_prefetch_abi_version(void);

/* Opens `path` for reading with `policy` (none, readahead, stride, markov, pattern).
 * `budget_bytes` sizes the process's prefetch cache when it starts (0: the running
 * engine's, or 64 MiB); a different budget while other files are open is refused.
 * Returns 0 and sets *out, or -1 with `message` naming the file and the problem. */
int patio_prefetch_open(const char *path, const char *policy, uint64_t budget_bytes,
                        PatioPrefetchFile **out, char *message, size_t message_len);

/* Reads up to `len` bytes at `offset` into `buf`; *got gets the bytes read (short only
 * at end of file). Returns 0, or -1 with `message` set. */
int patio_prefetch_read(PatioPrefetchFile *file, uint64_t offset, void *buf, uint64_t len,
                        uint64_t *got, char *message, size_t message_len);

void patio_prefetch_stats(const PatioPrefetchFile *file, PatioPrefetchStats *stats);

/* Ends the stream (unused prefetches count as waste) and frees the handle. */
void patio_prefetch_close(PatioPrefetchFile *file);

/* A prediction policy alone, for a front end that reads ahead itself. */
typedef struct PatioPolicy PatioPolicy;

/* A new policy (none, readahead, stride, markov, pattern). 0, or -1 with `message`. */
int patio_policy_new(const char *policy, PatioPolicy **out, char *message, size_t message_len);

/* Tells the policy about a read of `len` bytes at `offset`; writes up to `cap` predicted
 * next reads whose confidence is at least `min_confidence`, nearest first, as (offset,
 * length) pairs into `hints` (room for 2 * cap values), looking up to `depth` reads
 * ahead. Returns how many were written. */
size_t patio_policy_observe(PatioPolicy *policy, uint64_t offset, uint64_t len, uint32_t depth,
                            float min_confidence, uint64_t *hints, size_t cap);

void patio_policy_free(PatioPolicy *policy);

#ifdef __cplusplus
}
#endif

#endif /* PATIO_PREFETCH_H */
