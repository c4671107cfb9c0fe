/* patio_layout.h - the C ABI of patio's HDF5 layout core (crates/patio-layout).
 *
 * For the HDF5 VOL connector and the MPI-IO layer: describe where an array's bytes are
 * (contiguous, or chunked with per-chunk addresses and, for filtered chunks, stored
 * sizes), flatten hyperslab selections into byte extents, price them with eq 3.1 on
 * patio's striped storage model, and choose among an array and its replicas.
 *
 * Every function returns PATIO_OK (0) or a negative PATIO_E* code and never crashes on
 * bad input; patio_layout_last_error() gives the calling thread's last message.
 * Hyperslabs are passed as nslabs x (start[rank], stride[rank], count[rank],
 * block[rank]) uint64 values, as H5Sget_regular_hyperslab hands them over.
 * Link with -lpatio_layout.
 */
#ifndef PATIO_LAYOUT_H
#define PATIO_LAYOUT_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define PATIO_OK 0
#define PATIO_ENULL (-1)     /* a required pointer was null */
#define PATIO_EINVAL (-2)    /* rank, bounds, chunk index, preset or constants invalid */
#define PATIO_ERANGE (-3)    /* output buffer too small; the count needed was stored */
#define PATIO_EINTERNAL (-4) /* an internal error, reported instead of crashing */

typedef struct PatioLayout PatioLayout;
typedef struct PatioDecider PatioDecider;

/* The message of this thread's last failure (never NULL). */
const char *patio_layout_last_error(void);

/* Row-major storage of shape[rank] elements of itemsize bytes at byte `base`. */
int patio_layout_contiguous(uint32_t rank, const uint64_t *shape, uint64_t itemsize,
                            uint64_t base, PatioLayout **out);

/* Chunked storage: chunk[rank]; addresses[nchunks] in row-major chunk-grid order
 * (negative = not allocated); stored[nchunks] the stored sizes of filtered chunks, or
 * NULL for unfiltered ones. */
int patio_layout_chunked(uint32_t rank, const uint64_t *shape, uint64_t itemsize,
                         const uint64_t *chunk, uint64_t nchunks, const int64_t *addresses,
                         const uint64_t *stored, PatioLayout **out);

void patio_layout_free(PatioLayout *layout);

/* The byte extents of the hyperslabs under `layout`, in buffer order, consecutive ones
 * merged: up to `cap` into offsets/lengths, the count into *n (PATIO_ERANGE when cap is
 * too small, *n then being the count needed). */
int patio_layout_flatten(const PatioLayout *layout, uint32_t rank, uint64_t nslabs,
                         const uint64_t *slabs, uint64_t *offsets, uint64_t *lengths,
                         uint64_t cap, uint64_t *n);

/* eq 3.1's modelled seconds of reading the hyperslabs from `layout` on the storage
 * model `preset` ("lustre", "hdd", "ssd"); consts = {T_pg, T_chk, T_lat, T_dec}. */
int patio_layout_price(const PatioLayout *layout, const char *preset, const double *consts,
                       uint32_t rank, uint64_t nslabs, const uint64_t *slabs,
                       double *seconds);

/* A decider for `original` with `nfull` full replicas (same shape, any chunking). */
int patio_decider_new(const PatioLayout *original, const PatioLayout *const *full,
                      uint64_t nfull, const char *preset, const double *consts,
                      PatioDecider **out);

/* Adds a replica holding the original transposed by perm[rank], stored in `layout`. */
int patio_decider_add_transposed(PatioDecider *decider, const PatioLayout *layout,
                                 uint32_t rank, const uint32_t *perm);

/* How to read the hyperslabs: *replica = -1 for the original, else the replica's index
 * (full replicas first, then transposed ones in the order added); *seconds its modelled
 * time, *saved the modelled saving over the original. Decisions are remembered. */
int patio_decider_choose(PatioDecider *decider, uint32_t rank, uint64_t nslabs,
                         const uint64_t *slabs, int64_t *replica, double *seconds,
                         double *saved);

void patio_decider_free(PatioDecider *decider);

#ifdef __cplusplus
}
#endif

#endif /* PATIO_LAYOUT_H */
