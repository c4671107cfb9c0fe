/*
 * mpiio.h — internal interfaces of libpatio_mpiio.so, patio's MPI-IO layer (a PMPI
 * interposition library, LD_PRELOADed into every process of a job).
 *
 * The library references no MPI symbol at link time: PMPI functions and Open MPI's
 * predefined handles (MPI_BYTE, MPI_COMM_SELF, …, which mpi.h defines as addresses of
 * ompi_mpi_* objects) are looked up at run time, so that the library loads and stays
 * inert in processes that are not MPI programs (mpirun, shells, python without MPI).
 *
 * Modules: runtime.c (symbol lookup, the Open MPI check, warnings), files.c (the table
 * of files the layer watches), flatten.c (datatypes and file views → byte runs),
 * serve.c (libpatio_reorg.so: the serving decision, reads, statistics), shared.c (the
 * shared file pointer the layer keeps for served files), trace.c (MPIIO
 * records through libpatio_trace.so), io.c (the read/write families), interpose.c (the
 * MPI_File_* entry points).
 */
#ifndef PATIO_MPIIO_H
#define PATIO_MPIIO_H

#include <limits.h>
#include <mpi.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "../crates/patio-prefetch/include/patio_prefetch.h"
#include "../crates/patio-reorg/include/patio_reorg.h"

#define EXPORT __attribute__((visibility("default")))
#define LIKELY(x) __builtin_expect(!!(x), 1)
#define UNLIKELY(x) __builtin_expect(!!(x), 0)

/* ---- runtime.c ---- */
void *mpiio_resolve(const char *name);
/* Loads one of patio's C libraries once (`*state`: 0 not tried, 1 loaded, 2 unavailable):
 * `name` from $`env`, else beside libpatio_mpiio.so; `names` (NULL-terminated) resolved
 * into `fns`, the first being its ABI version function, which must return `abi`. 1 when
 * loaded; else one warning ending in `without`, and 0. */
int mpiio_load_library(const char *name, const char *env, const char *const *names, void **fns,
                       uint32_t abi, const char *without, int *state);

/* A PMPI function through a pointer resolved at first use: P(File_read_at)(…). */
#define P(f)                                                                     \
    ({                                                                           \
        static __typeof__(PMPI_##f) *p_;                                         \
        __typeof__(PMPI_##f) *q_ = __atomic_load_n(&p_, __ATOMIC_RELAXED);       \
        if (UNLIKELY(!q_)) {                                                     \
            q_ = (__typeof__(PMPI_##f) *)mpiio_resolve("PMPI_" #f);              \
            __atomic_store_n(&p_, q_, __ATOMIC_RELAXED);                         \
        }                                                                        \
        q_;                                                                      \
    })

/* Open MPI's predefined handles, found at run time (valid when mpiio_ready()). */
struct mpiio_handles {
    MPI_Datatype byte, int_, long_long;
    MPI_Comm self;
    MPI_Op min, sum, max, no_op, replace;
    MPI_Info info_null;
    MPI_Errhandler errors_return;
};
extern struct mpiio_handles H;

/* 1 when this process runs the MPI the library was built for (checked once, at the
 * first MPI_File_open; otherwise one warning and every call passes through). */
int mpiio_ready(void);
/* One line on stderr: "patio: MPI-IO: <text>". */
void mpiio_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* This process's rank in MPI_COMM_WORLD (or -1). */
int mpiio_world_rank(void);
/* Per-thread depth of the layer's own calls: nested MPI_File_* calls pass through. */
extern __thread int mpiio_depth;
uint64_t mpiio_now_ns(void);

/* ---- flatten.c ---- */
typedef struct {
    int64_t off, len;
} run_t;

/* Byte runs of a datatype's type map, in type-map order, adjacent runs merged. */
typedef struct {
    run_t *runs;
    size_t n, cap;
    int64_t size;   /* bytes of data (MPI_Type_size) */
    int64_t lb;     /* MPI_Type_get_extent */
    int64_t extent;
} flat_t;

/* Flattens `t`; 0, or -1 when it cannot (darray, out of memory): then the caller
 * passes the call through. */
int flat_type(MPI_Datatype t, flat_t *out);
void flat_free(flat_t *f);
/* 1 when `count` elements of a datatype flattened as `f` are one contiguous run
 * starting at byte f->runs[0].off. */
int flat_contiguous(const flat_t *f, int64_t count);
/* Places the first `n` packed bytes of `src` where consecutive elements of the datatype
 * flattened as `f` put them in `dst` (a read cut short fills part of an element). */
void flat_scatter(const flat_t *f, const void *src, uint64_t n, void *dst);

/* A file view: data byte b of the view lies at disp + (b / size) * extent + the
 * place of b % size among the filetype's runs. */
typedef struct {
    int64_t disp;
    int64_t etype_size;
    flat_t ft;
    int64_t *prefix; /* prefix[i] = data bytes before ft.runs[i] */
    int identity;    /* one run covering the whole extent: b → disp + b */
} view_t;

/* Byte extents (offset, length pairs) of the file. */
typedef struct {
    uint64_t *v; /* v[2i], v[2i+1] */
    size_t n, cap;
    uint64_t bytes;
} extents_t;

int view_set(view_t *v, MPI_Offset disp, MPI_Datatype etype, MPI_Datatype filetype);
void view_default(view_t *v);
void view_free(view_t *v);
/* The file extents of view data bytes [b, b + n); 0 or -1 (out of memory). */
int view_extents(const view_t *v, uint64_t b, uint64_t n, extents_t *out);
/* Data bytes of the view that lie before file offset `end`. */
uint64_t view_bytes_before(const view_t *v, uint64_t end);
void extents_free(extents_t *e);

/* ---- files.c ---- */
typedef struct pfile {
    MPI_File fh;
    MPI_Comm comm;              /* a duplicate of the file's communicator (own_comm) */
    int own_comm;
    char name[PATH_MAX];        /* as the program named it */
    char path[PATH_MAX];        /* absolute, symbolic links resolved (for records) */
    int trace;                  /* MPIIO records go to libpatio_trace.so */
    int stats;                  /* PATIO_MPIIO_STATS is set */
    int serving;                /* the ranks agreed to serve: reads go through the layer,
                                   which keeps the individual (and shared) file pointers */
    int rank;                   /* this rank in comm (while serving) */
    MPI_Win shared_win;         /* shared.c: the shared file pointer, on rank 0 … */
    int64_t *shared_mem;
    int shared_ok;              /* … kept by the layer (every rank created the window) */
    int shared_tried;           /* the layer tried to take the shared pointer over */
    int64_t shared_passed;      /* etypes this rank's shared-pointer calls asked MPI for
                                   since the view was set, before the takeover */
    int wrote;                  /* this rank wrote the file while serving: its reads, and
                                   after the next sync every rank's, read the original */
    int split_real;             /* the begin call a split collective write was issued as */
    PatioReorgFile *served;     /* the container; NULL once a read of it failed */
    int view_ok;                /* the current view is flattened */
    view_t view;
    MPI_Offset pos;             /* individual file pointer (etypes), while serving */
    uint64_t split_bytes;       /* bytes of the split collective begun, while served */
    int split_served;
    int warned;
    uint64_t served_calls, served_bytes, passed_calls;
    uint64_t turn_calls;        /* collective reads served taking turns (turns.c) */
    uint64_t physical_reads;
    /* prefetch.c: an engine stream for independent reads of a file not served
     * (PATIO_MPIIO_PREFETCH), or, on a served file, a policy and the bytes it read ahead */
    PatioPrefetchFile *prefetch;
    PatioPolicy *policy;
    uint64_t *ahead;            /* read-ahead pieces: (offset, length) pairs … */
    size_t ahead_n;
    char *ahead_buf;            /* … and their bytes, one after another */
    uint64_t ahead_limit;       /* most bytes read ahead at a miss (PATIO_MPIIO_READAHEAD) */
    uint64_t prefetched_bytes, prefetch_used_bytes;
    int independent;            /* the call being served is not collective (io.c) */
    int ordered;                /* PATIO_MPIIO_ORDER=1 on every rank: collective reads of
                                   the served file take turns (turns.c) */
} pfile_t;

/* Nonzero while some file is watched: the fast path of every call tests only this. */
extern int mpiio_watching;
pfile_t *files_find(MPI_File fh);
int files_add(pfile_t *f);
void files_remove(pfile_t *f);
/* Calls fn on every watched file (MPI_Finalize). */
void files_each(void (*fn)(pfile_t *));

/* ---- turns.c ---- */
/* The turns of one collective read (see turns.c). */
typedef struct {
    MPI_Comm comm;
    size_t n;         /* this rank's physical reads */
    int *prev, *next; /* per read: the rank whose read comes before / after, or -1 */
    char *done;       /* per read: waited (2i), handed on (2i + 1) */
    int scheduled;
} turns_t;
void turns_init(turns_t *t, MPI_Comm comm);
/* The pacer to give patio_reorg_read_paced. */
PatioReorgPacer turns_pacer(turns_t *t);
/* Always, on every rank, after the collective read (see turns.c). */
void turns_finish(turns_t *t);

/* ---- serve.c ---- */
/* This rank's container for file `name` opened with `amode`, or NULL (not registered,
 * opened for writing, or not servable: one warning). The ranks then agree. */
PatioReorgFile *serve_try(const char *name, int amode);
void serve_release(PatioReorgFile *h);
/* 1 when PATIO_MPIIO_WRITES=refuse and `name`, opened with write access, has a current
 * registered container (one warning): the open fails with MPI_ERR_READ_ONLY. */
int serve_refuses_write(const char *name, int amode);
/* Reads `count` × `dt` at view data byte `b` from the container into `buf`, taking
 * `turns` (a collective read of an ordered file; NULL otherwise). 0 and *bytes set, or
 * -1 (one warning; serving stops for the file and the caller reads the original).
 * `ext` receives the file extents (for tracing). */
int serve_read(pfile_t *f, uint64_t b, void *buf, int count, MPI_Datatype dt, uint64_t *bytes,
               extents_t *ext, turns_t *turns);
void serve_close(pfile_t *f);
/* Sets `st` (may be MPI_STATUS_IGNORE) to a completed read of `bytes` bytes. */
void status_set_bytes(MPI_Status *st, uint64_t bytes);
/* A request that is already complete, whose status reports `bytes` bytes. */
int completed_request(uint64_t bytes, MPI_Request *req);
/* Writes the PATIO_MPIIO_STATS record of `f`. */
void stats_write(pfile_t *f);
/* patio_reorg_read of the served file (for prefetch.c's read-ahead); its size. */
int serve_extents(pfile_t *f, const uint64_t *v, size_t n, void *dest, uint64_t *got, char *msg,
                  size_t msg_len);
uint64_t serve_size(pfile_t *f);

/* Stops serving `f` for this rank: its reads then go to the original, at the layer's
 * pointers (a write, a sync after another rank's write, atomic mode, a new size). */
void serve_stop(pfile_t *f);

/* ---- shared.c ---- */
/* Collective over f->comm, at the first collective call that needs the shared pointer
 * (ordered access, seek_shared) of a served file: the layer takes the shared pointer over
 * from MPI, in a window holding MPI's position. Sets f->shared_ok on every rank alike
 * (once: later calls return it); when the MPI cannot make the window, shared-pointer
 * calls keep passing through to MPI. */
int shared_take(pfile_t *f);
/* Collective (MPI_File_close). */
void shared_close(pfile_t *f);
/* Atomically the shared pointer before adding `etypes`; an MPI error code. */
int shared_add(pfile_t *f, int64_t etypes, MPI_Offset *before);
/* The shared pointer. */
int shared_get(pfile_t *f, MPI_Offset *at);
/* Sets the shared pointer (called by one rank; the caller synchronises the others). */
int shared_set(pfile_t *f, MPI_Offset at);
/* Collective: the ordered-access position of this rank's `etypes` (the ranks' requests
 * one after another in rank order from the shared pointer, which then moves past all). */
int shared_ordered(pfile_t *f, int64_t etypes, MPI_Offset *at);

/* ---- prefetch.c ---- */
/* After the open's agreement: PATIO_MPIIO_PREFETCH=POLICY gives a file opened read-only
 * an engine stream (not served) or a read-ahead policy (served). */
void prefetch_open(pfile_t *f, int amode);
/* The file extents `ext` one after another into `dest` (cut at end of file), through the
 * engine stream (not served) or the container with read-ahead (served). 0, or -1 with
 * `msg`. */
int prefetch_read(pfile_t *f, const extents_t *ext, void *dest, uint64_t *got, char *msg,
                  size_t msg_len);
/* Ends the stream or policy, keeping its counters in `f`. */
void prefetch_close(pfile_t *f);

/* ---- io.c ---- */
/* Call codes of MPIIO records (docs/FORMATS.md, "Raw capture"); a write's code is its
 * read's + 20. */
enum {
    C_READ_AT = 11, C_READ_AT_ALL, C_READ, C_READ_ALL, C_READ_SHARED, C_READ_ORDERED,
    C_IREAD_AT, C_IREAD_AT_ALL, C_IREAD, C_IREAD_ALL, C_IREAD_SHARED,
    C_READ_AT_ALL_BEGIN, C_READ_ALL_BEGIN, C_READ_ORDERED_BEGIN,
    C_WRITE_AT = 31
};
#define C_WRITE(c) ((c) + 20)
/* One call of the read or write family on a watched file (or any file: unwatched
 * ones pass straight through). `off` is used by explicit-offset calls, `st` by
 * blocking ones, `req` by nonblocking ones. */
int mpiio_io(int call, MPI_File fh, MPI_Offset off, const void *buf, int count, MPI_Datatype dt,
             MPI_Status *st, MPI_Request *req);
/* The end of a split collective (read or write, any addressing). */
int mpiio_split_end(int call, MPI_File fh, const void *buf, MPI_Status *st);

/* ---- trace.c ---- */
/* 1 when PATIO_TRACE_DIR is set and libpatio_trace.so is loaded. */
int trace_available(void);
/* One MPIIO record per extent, cut after `bytes` bytes in all. */
void trace_extents(pfile_t *f, int op, int call, const extents_t *e, uint64_t bytes, uint64_t t0,
                   uint64_t t1);

#endif
