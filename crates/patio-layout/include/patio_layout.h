/* patio_layout.h - the C ABI of patio's HDF5 layout core (crates/patio-layout).
 *
 * For the HDF5 VOL connector and the MPI-IO layer: describe where an array's bytes are
 * (contiguous, or chunked with per-chunk addresses and, for filtered chunks, stored
 * sizes), flatten hyperslab selections into byte extents, price them with eq 3.1 on
 * patio's striped storage model, choose among an array and its replicas (full,
 * transposed, concatenated products of index sets, concatenated points), and carry a
 * choice out: a plan's pieces say which copy to read, which selection in it, and where
 * its elements land in the caller's buffer.
 *
 * Every function returns PATIO_OK (0) or a negative PATIO_E* code and never crashes on
 * bad input; patio_layout_last_error() gives the calling thread's last message.
 * Hyperslabs are passed as nslabs x (start[rank], stride[rank], count[rank],
 * block[rank]) uint64 values, as H5Sget_regular_hyperslab hands them over.
 * Outputs of variable length follow one rule: the caller passes an array and its
 * capacity `cap` (in items), the count is always stored in *n, and PATIO_ERANGE says
 * cap was too small (call again with cap >= *n; a NULL array with cap 0 asks the count).
 * Handles are not shared between threads without a lock; distinct handles may be used
 * from distinct threads. Link with -lpatio_layout.
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
typedef struct PatioPlan PatioPlan;

/* Plan kinds (patio_plan_summary). */
#define PATIO_PLAN_ORIGINAL 0 /* the original alone */
#define PATIO_PLAN_WHOLE 1    /* one full or transposed replica */
#define PATIO_PLAN_SUB 2      /* one concatenated product replica holding the request */
#define PATIO_PLAN_SPLIT 3    /* a product replica's part, the rest from the original */
#define PATIO_PLAN_POINTS 4   /* a point replica's points (and the rest from the original) */
#define PATIO_PLAN_COMBINED 5 /* several product replicas (and the rest from the original) */

/* Selection kinds of a piece's side, and the sides. */
#define PATIO_SEL_GRIDS 0  /* grids: per axis, sorted disjoint (start, length) blocks */
#define PATIO_SEL_POINTS 1 /* points: rank coordinates each, in order */
#define PATIO_SOURCE 0     /* in the copy's index space */
#define PATIO_DEST 1       /* in the buffer's index space */

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

/* The reader's chunk cache of `layout` in bytes (default HDF5's 1 MiB): an unfiltered
 * chunk no larger is read whole, as HDF5 brings it into its cache; a larger one in part. */
int patio_layout_set_chunk_cache(PatioLayout *layout, uint64_t bytes);

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

/* Replicas are numbered in the order they join: the full ones of patio_decider_new
 * first, then each added one. Adding a replica forgets remembered decisions and
 * invalidates the decider's earlier plans for patio_plan_extents. */

/* Adds a replica holding the original transposed by perm[rank] (its axis i is the
 * original's perm[i]), stored in `layout`. */
int patio_decider_add_transposed(PatioDecider *decider, const PatioLayout *layout,
                                 uint32_t rank, const uint32_t *perm);

/* Adds a concatenated replica holding the product of per-axis sorted, duplicate-free
 * index sets (lens[rank] indices each, concatenated in `sets`), stored with its axes
 * permuted by perm[rank] in `layout` (shape: lens permuted). */
int patio_decider_add_product(PatioDecider *decider, const PatioLayout *layout,
                              uint32_t rank, const uint64_t *lens, const uint64_t *sets,
                              const uint32_t *perm);

/* Adds a concatenated replica holding the elements at the sorted row-major linear
 * indices linear[npoints], stored as a 1-D array of npoints in `layout`. */
int patio_decider_add_points(PatioDecider *decider, const PatioLayout *layout,
                             uint64_t npoints, const uint64_t *linear);

/* How to read the hyperslabs: *replica = the replica read whole (a full or transposed
 * one), -1 for any other plan (use patio_decider_plan to carry those out); *seconds its
 * modelled time, *saved the modelled saving over the original. Decisions are
 * remembered. */
int patio_decider_choose(PatioDecider *decider, uint32_t rank, uint64_t nslabs,
                         const uint64_t *slabs, int64_t *replica, double *seconds,
                         double *saved);

void patio_decider_free(PatioDecider *decider);

/* The plan for reading the hyperslabs (the choice of patio_decider_choose), or for
 * reading npoints points (coords: rank values each), as pieces; free with
 * patio_plan_free.
 *
 * The buffer the request fills: for a product request (one hyperslab, or a union of
 * them forming a product of per-axis index sets, as h5py's fancy indexing makes) its
 * shape is the number of selected indices per axis, row-major (the order HDF5 reads a
 * hyperslab selection in); for points, or a union that is no product, it is 1-D in the
 * request's element order. Each piece reads its source selection from its copy; the
 * elements, in the copy's order (row-major over each grid, in turn; points in list
 * order), fill the destination's elements iterated with buffer axis order[0] outermost
 * ... order[rank-1] innermost (the identity unless the copy stores the axes permuted).
 * Pieces never overlap and together fill the buffer. */
int patio_decider_plan(PatioDecider *decider, uint32_t rank, uint64_t nslabs,
                       const uint64_t *slabs, PatioPlan **out);
int patio_decider_plan_points(PatioDecider *decider, uint32_t rank, uint64_t npoints,
                              const uint64_t *coords, PatioPlan **out);

/* The plan's kind (PATIO_PLAN_*), modelled seconds, saving over the original, pieces. */
int patio_plan_summary(const PatioPlan *plan, int32_t *kind, double *seconds,
                       double *saved, uint64_t *npieces);

/* The buffer's shape: rank into *n, sides into dims[cap]. */
int patio_plan_buffer(const PatioPlan *plan, uint64_t *dims, uint64_t cap, uint64_t *n);

/* Piece i: *copy = -1 for the original, else the replica's index; the axis order into
 * order[cap] (the buffer's rank into *n). */
int patio_plan_piece(const PatioPlan *plan, uint64_t i, int64_t *copy, uint32_t *order,
                     uint64_t cap, uint64_t *n);

/* Side `which` (PATIO_SOURCE, PATIO_DEST) of piece i: its kind (PATIO_SEL_*), rank, and
 * count (grids, or points). */
int patio_plan_selection(const PatioPlan *plan, uint64_t i, int32_t which, int32_t *kind,
                         uint32_t *rank, uint64_t *count);

/* Axis `axis` of grid `grid` of that side: (start, length) pairs into blocks[2 * cap],
 * the number of blocks into *n. */
int patio_plan_axis(const PatioPlan *plan, uint64_t i, int32_t which, uint64_t grid,
                    uint32_t axis, uint64_t *blocks, uint64_t cap, uint64_t *n);

/* The points of that side: rank coordinates each into coords[rank * cap], the number of
 * points into *n. */
int patio_plan_coords(const PatioPlan *plan, uint64_t i, int32_t which, uint64_t *coords,
                      uint64_t cap, uint64_t *n);

/* The byte extents piece i's source touches in its copy, as patio_layout_flatten gives
 * them (filtered chunks whole; *inflated the bytes they decompress to): what an MPI-IO
 * layer reads. `plan` must come from `decider` since its replicas last changed. */
int patio_plan_extents(const PatioDecider *decider, const PatioPlan *plan, uint64_t i,
                       uint64_t *offsets, uint64_t *lengths, uint64_t cap, uint64_t *n,
                       uint64_t *inflated);

void patio_plan_free(PatioPlan *plan);

/* ---- Recording reads into a file's layout knowledge base (the VOL connector) ----
 * The rows and record log patio.h5 writes (docs/FORMATS.md "Record log"), so that
 * `patio layout status|advise|build` merge them alike. */
typedef struct PatioRecorder PatioRecorder;

/* File selection kinds of patio_recorder_read, and the values each takes. */
#define PATIO_REC_ALL 0     /* H5S_SEL_ALL: no values */
#define PATIO_REC_REGULAR 1 /* start, stride, count, block: rank values each */
#define PATIO_REC_BLOCKS 2  /* nitems x (first corner, last corner), as H5Sget_select_hyper_blocklist */
#define PATIO_REC_POINTS 3  /* nitems x rank coordinates, in buffer order */

/* The knowledge base directory of `source` (NUL-terminated into buf[cap]; *n = its
 * length). */
int patio_kb_dir(const char *source, char *buf, uint64_t cap, uint64_t *n);

/* A recorder for the reads of `source`, or *out = NULL (PATIO_OK) when the file has no
 * knowledge base (no kb.sqlite in its directory). */
int patio_recorder_open(const char *source, PatioRecorder **out);

/* Records one read of dataset `dset` (its path in the file) of shape[rank]: the file
 * selection (kind, nitems, values), the result's shape out_shape[out_rank], the bytes
 * delivered, when it ended (seconds since the epoch) and how long it took. Appended to
 * the process's record log every 256 reads. */
int patio_recorder_read(PatioRecorder *rec, const char *dset, uint32_t rank,
                        const uint64_t *shape, int32_t kind, uint64_t nitems,
                        const uint64_t *values, uint32_t out_rank, const uint64_t *out_shape,
                        uint64_t bytes, double t0, double seconds);

/* Appends the buffered reads now. */
int patio_recorder_flush(PatioRecorder *rec);

/* Appends the buffered reads, ends the log and frees the recorder (NULL: nothing). */
int patio_recorder_close(PatioRecorder *rec);

/* ---- Serving reads from replicas (the VOL connector) ----
 * One dataset's ready replicas from its file's knowledge base, checked as patio.h5
 * checks them (file present; the source's version, or the checksum of the dataset's
 * bytes, as at the build); the caller reads each replica's layout from its file, gets a
 * decider over the current ones, carries out its plans (patio_decider_plan[_points],
 * patio_plan_*) and counts the reads each replica served (the knowledge base's
 * `uses`, reported as `served_reads`). Replicas found missing, damaged or stale are
 * marked so in the knowledge base and described in notes, never served. */
typedef struct PatioServe PatioServe;

/* The ready replicas of dataset `dset` (its path in the file) of `file`; *out = NULL
 * (PATIO_OK) when the file has no knowledge base or the dataset no ready replica. */
int patio_serve_open(const char *file, const char *dset, PatioServe **out);

/* The number of replicas into *n and, when i < *n, replica i's file into *path (valid
 * while `serve` lives; its dataset is "data"). */
int patio_serve_replica(const PatioServe *serve, uint64_t i, uint64_t *n, const char **path);

/* Replica i's layout as read from its file (copied); a replica without one is unreadable
 * and marked damaged by patio_serve_ready. */
int patio_serve_set_layout(PatioServe *serve, uint64_t i, const PatioLayout *layout);

/* The decider over `original` (the dataset's layout in `file`) and the current replicas
 * (*decider is owned by `serve`); *nnotes lines describe the replicas left out. */
int patio_serve_ready(PatioServe *serve, const PatioLayout *original, PatioDecider **decider,
                      uint64_t *nnotes);

/* Note k about the replicas left out so far (by patio_serve_open, then all of them by
 * patio_serve_ready), valid while `serve` lives; PATIO_ERANGE past the last. */
int patio_serve_note(const PatioServe *serve, uint64_t k, const char **line);

/* The replica (numbered as by patio_serve_replica) a piece's copy (>= 0) reads. */
int patio_serve_copy(const PatioServe *serve, int64_t copy, uint64_t *i);

/* *current = 1 while the source keeps the version its replicas were checked against;
 * 0: serve nothing more from this handle (close it and open anew). */
int patio_serve_current(const PatioServe *serve, int *current);

/* Counts one read served (partly) from replica i, saving `saved` modelled seconds. */
int patio_serve_used(PatioServe *serve, uint64_t i, double saved);

/* Replica i failed while serving (`why`): marked damaged in the knowledge base. */
int patio_serve_damaged(PatioServe *serve, uint64_t i, const char *why);

/* Records the reads counted - a served log in the knowledge base's records directory,
 * which the next merge adds to the replicas' `uses` - and frees `serve` (NULL:
 * nothing). */
int patio_serve_close(PatioServe *serve);

/* Marks every ready replica of dataset `dset` of `file` stale (before a write to it). */
int patio_serve_written(const char *file, const char *dset);

#ifdef __cplusplus
}
#endif

#endif /* PATIO_LAYOUT_H */
