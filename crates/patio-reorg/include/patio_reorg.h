/*
 * patio_reorg.h — the C ABI of patio's reorganized files (libpatio_reorg.so).
 *
 * A file reorganized by `patio reorg apply FILE --trace T -o OUT` is registered for
 * FILE: a registration beside FILE (docs/FORMATS.md, "Reorganization registration")
 * names the container OUT and the version of FILE it was built from. A front end that
 * reads FILE on a program's behalf (the MPI-IO layer libpatio_mpiio.so) opens FILE
 * here; when a registration exists and FILE is still the version the container was
 * built from (patio's one file-version rule: device, inode, size, modification and
 * change times), the reads are served from the container through its remap, in the
 * fewest physical reads. Anything else — no registration, a stale source, a missing
 * or damaged container — is reported so that the caller reads FILE itself.
 *
 * Every function is thread-safe on distinct handles; one handle may be read from
 * several threads at once. No function panics across the boundary or keeps a pointer
 * it was given. Messages are NUL-terminated and truncated to the caller's buffer.
 */
#ifndef PATIO_REORG_H
#define PATIO_REORG_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The ABI version this header describes; compare with patio_reorg_abi_version(). */
#define PATIO_REORG_ABI_VERSION 2u

/* Results of patio_reorg_open. */
#define PATIO_REORG_SERVED 0         /* registered and current: *out is set */
#define PATIO_REORG_NOT_REGISTERED 1 /* no registration for this file: read it natively */
#define PATIO_REORG_BYPASSED 2       /* registered but not servable (stale source, container
                                        missing or damaged): message says why; read natively */
#define PATIO_REORG_ERROR (-1)       /* bad arguments or an I/O error: message says what */

typedef struct PatioReorgFile PatioReorgFile;

/* What a handle served so far. */
typedef struct {
    uint64_t calls;          /* patio_reorg_read calls */
    uint64_t bytes;          /* logical bytes returned */
    uint64_t physical_reads; /* reads issued to the container's data logs */
} PatioReorgStats;

uint32_t patio_reorg_abi_version(void);

/* Opens `source` (a path as the program named it) for serving. Returns one of the
 * PATIO_REORG_* results; *out is set only with PATIO_REORG_SERVED. */
int patio_reorg_open(const char *source, PatioReorgFile **out, char *message, size_t message_len);

/* The logical size of the served file (the source's size). */
uint64_t patio_reorg_size(const PatioReorgFile *file);

/* The container's path (valid until patio_reorg_close). */
const char *patio_reorg_container(const PatioReorgFile *file);

/* Reads the logical extents (offset, length pairs: extents[2i], extents[2i+1]) one
 * after another into `buf`. Extents reaching past the end of the file are cut there
 * (as a read of the original would be); *bytes gets the bytes placed in `buf`. Returns
 * 0, or -1 with `message` set (nothing is guaranteed about `buf` then). */
int patio_reorg_read(PatioReorgFile *file, const uint64_t *extents, size_t n_extents, void *buf,
                     uint64_t *bytes, char *message, size_t message_len);

/* Where one physical read of a paced read lies: bytes [start, end) of the
 * container's data log `chunk`. */
typedef struct {
    uint32_t chunk;
    uint64_t start;
    uint64_t end;
} PatioReorgPlace;

/* The caller's schedule of a paced read: schedule(ctx, places, n) once, before any
 * read (n may be 0), with where each physical read lies in the order they are issued;
 * pace(ctx, i, after) before (after = 0) and right after (after = 1) the i-th read.
 * Either returns 0 to go on, anything else to stop the read (-1 returned). A null
 * function is skipped. */
typedef struct {
    void *ctx;
    int (*schedule)(void *ctx, const PatioReorgPlace *places, size_t n);
    int (*pace)(void *ctx, size_t i, int after);
} PatioReorgPacer;

/* patio_reorg_read with its physical reads scheduled by `pacer` (null: as
 * patio_reorg_read). The MPI-IO layer uses it to issue the reads of all ranks of a
 * collective call one at a time in container order. */
int patio_reorg_read_paced(PatioReorgFile *file, const uint64_t *extents, size_t n_extents,
                           void *buf, uint64_t *bytes, const PatioReorgPacer *pacer,
                           char *message, size_t message_len);

/* 0 when the source is still the version the container was built from, 1 when it
 * changed (message says how), -1 on error. Cheap: one stat. */
int patio_reorg_check(const PatioReorgFile *file, char *message, size_t message_len);

void patio_reorg_stats(const PatioReorgFile *file, PatioReorgStats *stats);

/* Closes the handle. */
void patio_reorg_close(PatioReorgFile *file);

#ifdef __cplusplus
}
#endif

#endif /* PATIO_REORG_H */
