/*
 * tracer.h — what the modules of libpatio_trace.so, patio's LD_PRELOAD tracer, share:
 * the state, the format constants, the real functions and the inline helpers of the
 * hot path. The modules:
 *   state.c        the state, memory pools, paths and the model of descriptors
 *   output.c       the raw capture file (CRC, frames, flush) and the record buffer
 *   lifecycle.c    initialisation, fork, fatal signals, exec and exit
 *   calls_posix.c  the open/close/dup/fcntl, read/write and lseek interposers
 *   calls_stdio.c  the stdio interposers (fopen/fdopen/fclose, fread/fwrite)
 * Built with -fvisibility=hidden: the library exports only the interposed functions and
 * patio_trace_record_external (EXPORT).
 *
 * The tracer, loaded into an unmodified program (LD_PRELOAD, normally by `patio trace --
 * CMD`), records every read and write the program makes on regular files through the C
 * library — POSIX calls (read/write, pread/pwrite, readv/writev, preadv/pwritev and
 * their 64/v2 variants, plus the glibc _chk forms) and the stdio calls fread/fwrite —
 * as (op, path, offset, length, start, end, thread) and writes one "raw capture" file
 * per process image to $PATIO_TRACE_DIR/<host>.<pid>.<n>.praw (docs/FORMATS.md).
 * `patio trace merge` turns a directory of them into one patio trace. Without
 * PATIO_TRACE_DIR the library only passes calls through.
 *
 * Semantics decided by the tracer (also in docs/FORMATS.md, "Raw capture"):
 *  - Recorded: calls that succeed, with the return value as length (0 for a read at end
 *    of file). Failed calls (-1) are not recorded. Only regular files and block devices
 *    are traced; pipes, sockets, terminals and directories are not.
 *  - Offsets of read/write/readv/writev come from a model of open file descriptions:
 *    open creates one (offset 0), dup/dup2/dup3/F_DUPFD share it, lseek sets it, I/O
 *    advances it, pread/pwrite leave it alone. Where the model cannot know the kernel's
 *    position it asks the kernel (lseek(fd, 0, SEEK_CUR) after the call, offset =
 *    position − bytes): descriptions inherited from before the library started, those
 *    shared with another process by fork, those also used by stdio (fopen/fdopen), and
 *    O_APPEND writes (the kernel moved to end of file atomically with the write).
 *  - stdio: offsets and lengths come from the stream position (the real ftello before
 *    and after fread; after fwrite, offset = position − bytes written), so fseek, ftell,
 *    rewind, fgets… need no bookkeeping and are not interposed; only fread/fwrite (and
 *    their _unlocked/_chk forms) are recorded. glibc's own stdio reads and writes use
 *    internal symbols, so a fread is recorded once, as STDIO.
 *  - Times are CLOCK_REALTIME nanoseconds (comparable across processes and hosts);
 *    thread ids are kernel tids.
 *  - Never changes what the program sees: errno is saved and restored around all
 *    bookkeeping and the real call's result is returned. The tracer allocates only with
 *    mmap, takes one spin lock (never across a real I/O call), and a thread-local
 *    guard sends every call made while the tracer is busy (its own writes, a signal
 *    handler interrupting it) straight to the C library.
 *    The output file is opened for each flush and closed after it: the program never
 *    sees an extra descriptor.
 *  - Flushed when the record buffer fills (PATIO_TRACE_BUFFER records, default 65536),
 *    before exec, at exit (destructor, _exit, _Exit) and on SIGSEGV, SIGBUS, SIGABRT,
 *    SIGTERM and SIGINT when the program leaves them at their default action: the
 *    tracer's handler flushes, restores the default and re-raises. sigaction/signal
 *    are interposed so the program still sees SIG_DFL there (Python, for one, installs
 *    its SIGINT handler only over SIG_DFL); the program's own handler replaces the
 *    tracer's. A process that recorded nothing writes no file.
 *  - Descriptor bookkeeping follows the open, openat and creat forms, close, close_range,
 *    dup, dup2, dup3, fcntl(F_DUPFD, F_DUPFD_CLOEXEC, F_SETFL), fopen/fdopen/fclose; a
 *    descriptor met for the first time (inherited, opened before the library started, opened by a
 *    call not interposed) is looked up in /proc/self/fd on first use. fsync and
 *    fdatasync move no data and the trace model has no operation for them: they are
 *    not interposed.
 *  - fork: the child starts an empty buffer and its own file (pthread_atfork); vfork
 *    children (shared memory) and children made without fork handlers never change
 *    the bookkeeping or write. exec: the new image starts a new file (<n> + 1 for the
 *    same pid).
 *  - PATIO_TRACE_ONLY=PREFIX keeps only files whose absolute, symlink-free path is
 *    PREFIX or lies below it.
 *  - Other layers record through patio_trace_record_external (exported): the MPI-IO
 *    layer (mpiio/, libpatio_mpiio.so) adds its MPIIO records to the same capture.
 */
#ifndef PATIO_TRACER_H
#define PATIO_TRACER_H

#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

/* Optimised builds define these as macros; the functions are what is interposed. */
#undef fread_unlocked
#undef fwrite_unlocked

#define EXPORT __attribute__((visibility("default")))
#define UNLIKELY(x) __builtin_expect(!!(x), 0)

/* ---- glibc entry points that have no declaration without _FORTIFY_SOURCE ---- */
int __open_2(const char *path, int flags);
int __open64_2(const char *path, int flags);
int __openat_2(int dirfd, const char *path, int flags);
int __openat64_2(int dirfd, const char *path, int flags);
ssize_t __read_chk(int fd, void *buf, size_t n, size_t buflen);
ssize_t __pread_chk(int fd, void *buf, size_t n, off_t off, size_t buflen);
ssize_t __pread64_chk(int fd, void *buf, size_t n, off64_t off, size_t buflen);
size_t __fread_chk(void *ptr, size_t ptrlen, size_t size, size_t n, FILE *fp);
size_t __fread_unlocked_chk(void *ptr, size_t ptrlen, size_t size, size_t n, FILE *fp);

/* Everything below is internal to the library (also its declarations, so that the
 * modules reach each other's symbols directly, not through the GOT or the PLT). */
#pragma GCC visibility push(hidden)

/* ---- format constants (docs/FORMATS.md, "Raw capture") ---- */
#define PRAW_VERSION 1
#define FRAME_PROCESS 1
#define FRAME_PATHS 2
#define FRAME_RECORDS 3
#define RECORD_BYTES 44
#define RECORDS_PER_FRAME 4096
#define PATHS_FRAME_LIMIT (512u * 1024u)
#define STAGE_BYTES (1024u * 1024u)
#define DEFAULT_BUFFER 65536u

enum { OP_READ = 0, OP_WRITE = 1 };
enum { LAYER_POSIX = 0, LAYER_STDIO = 1, LAYER_MPIIO = 2 };
enum {
    CALL_READ = 1, CALL_PREAD, CALL_READV, CALL_PREADV,
    CALL_WRITE, CALL_PWRITE, CALL_WRITEV, CALL_PWRITEV,
    CALL_FREAD, CALL_FWRITE
};

/* ---- real functions, resolved lazily (calls can arrive before the constructor) ---- */
/* Every C library function the tracer calls through REAL (state.c holds the pointers,
 * lifecycle.c resolves them all at start). */
#define TRACER_REAL_FUNCTIONS(X)                                                       \
    X(open) X(open64) X(openat) X(openat64)                                            \
    X(__open_2) X(__open64_2) X(__openat_2)                                            \
    X(__openat64_2) X(creat) X(creat64)                                                \
    X(close) X(close_range)                                                            \
    X(read) X(__read_chk) X(write)                                                     \
    X(pread) X(pread64) X(__pread_chk)                                                 \
    X(__pread64_chk) X(pwrite) X(pwrite64)                                             \
    X(readv) X(writev) X(preadv) X(preadv64)                                           \
    X(pwritev) X(pwritev64) X(preadv2)                                                 \
    X(preadv64v2) X(pwritev2) X(pwritev64v2)                                           \
    X(lseek) X(lseek64)                                                                \
    X(dup) X(dup2) X(dup3) X(fcntl)                                                    \
    X(fcntl64)                                                                         \
    X(fopen) X(fopen64) X(fdopen) X(fclose)                                            \
    X(fread) X(fread_unlocked) X(__fread_chk)                                          \
    X(__fread_unlocked_chk) X(fwrite) X(fwrite_unlocked)                               \
    X(ftello)                                                                          \
    X(execve) X(execv) X(execvp) X(execvpe)                                            \
    X(fexecve) X(_exit) X(_Exit)                                                       \
    X(sigaction) X(signal)

#define DECLARE_REAL(f) extern __typeof__(f) *real_##f;
TRACER_REAL_FUNCTIONS(DECLARE_REAL)

static inline void *resolve(const char *name) { return dlsym(RTLD_NEXT, name); }
#define REAL(f)                                                              \
    ({                                                                       \
        __typeof__(f) *p_ = __atomic_load_n(&real_##f, __ATOMIC_RELAXED);    \
        if (UNLIKELY(!p_)) {                                                 \
            p_ = (__typeof__(f) *)resolve(#f);                               \
            __atomic_store_n(&real_##f, p_, __ATOMIC_RELAXED);               \
        }                                                                    \
        p_;                                                                  \
    })

/* ---- memory: fixed-size elements in mmap'd chunks that never move ---- */
#define CHUNK_BITS 12
#define CHUNK_ELEMS (1u << CHUNK_BITS)
#define MAX_CHUNKS 4096u /* 16 Mi elements */

typedef struct {
    void *chunks[MAX_CHUNKS];
    size_t elem;
} pool_t;

/* Fresh zeroed memory from mmap, or NULL. */
void *map_bytes(size_t n);

/* Element i, or NULL; `create` (under the lock) maps its chunk when missing. */
static inline void *pool_at(pool_t *p, uint32_t i, int create)
{
    uint32_t c = i >> CHUNK_BITS;
    if (c >= MAX_CHUNKS)
        return NULL;
    char *chunk = __atomic_load_n((char **)&p->chunks[c], __ATOMIC_ACQUIRE);
    if (!chunk) {
        if (!create || !(chunk = map_bytes(CHUNK_ELEMS * p->elem)))
            return NULL;
        __atomic_store_n((char **)&p->chunks[c], chunk, __ATOMIC_RELEASE);
    }
    return chunk + (size_t)(i & (CHUNK_ELEMS - 1)) * p->elem;
}

/* ---- state ---- */

/* An open file description as the program sees it. */
typedef struct {
    int64_t offset;      /* modelled file position */
    uint32_t path;       /* path id */
    uint32_t refs;       /* descriptors pointing here */
    uint32_t next_free;
    uint8_t append;      /* O_APPEND */
    uint8_t kernel_pos;  /* ask the kernel for the position (see the comment above) */
} ofd_t;

/* Per-descriptor state: 0 unknown (never seen, or closed), 1 not traced, else ofd + 2. */
enum { FD_UNKNOWN = 0, FD_UNTRACED = 1 };

typedef struct {
    uint32_t next; /* next path id in the hash bucket + 1, 0 = end */
    uint32_t len;
    uint64_t hash;
    const char *text;
} path_t;

typedef struct {
    uint64_t off, len, t0, t1;
    uint32_t path, tid;
    uint8_t op, layer, call;
} rec_t;
_Static_assert(__builtin_offsetof(rec_t, tid) == 36, "record fields must be adjacent");

#define HASH_BUCKETS (1u << 16)
#define ARENA_BYTES (1024u * 1024u)

typedef struct {
    int lock;
    int ready; /* 0 not started, 1 starting, 2 tracing, 3 disabled */
    int after_exit;
    pid_t pid, ppid;
    int32_t rank;
    uint64_t init_ns;
    char dir[PATH_MAX];
    char only[PATH_MAX];
    size_t only_len;
    char host[256];
    char exe[PATH_MAX];
    /* records */
    rec_t *recs;
    uint32_t nrec, cap;
    /* descriptors and descriptions */
    pool_t fds;
    pool_t ofds;
    uint32_t nofd, free_ofd; /* free list head + 1, 0 = empty */
    int max_fd;
    /* paths */
    pool_t paths;
    uint32_t *buckets;
    uint32_t npaths, paths_written;
    char *arena;
    size_t arena_left;
    /* output: the file is opened for each flush and closed after it, so the program
     * never sees an extra descriptor */
    char out_name[PATH_MAX + 320];
    int have_name;
    int out_failed;
    uint32_t file_seq;
    unsigned char *stage;
    uint32_t crc_table[256];
    struct sigaction old_act[NSIG];
    unsigned char hooked[NSIG];
} tracer_state_t;

/* The tracer's state (state.c). */
extern tracer_state_t G;

extern __thread int tl_busy __attribute__((tls_model("initial-exec")));
extern __thread pid_t tl_tid __attribute__((tls_model("initial-exec")));

/* ---- hot-path helpers (inline: every interposed call goes through them) ---- */
static inline void lock(void)
{
    unsigned spins = 0;
    while (__atomic_exchange_n(&G.lock, 1, __ATOMIC_ACQUIRE)) {
        while (__atomic_load_n(&G.lock, __ATOMIC_RELAXED)) {
            if (++spins < 128)
                __builtin_ia32_pause();
            else
                sched_yield();
        }
    }
}

static inline void unlock(void) { __atomic_store_n(&G.lock, 0, __ATOMIC_RELEASE); }

static inline void enter(void)
{
    tl_busy++;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
}

static inline void leave(void)
{
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    tl_busy--;
}

static inline uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline uint32_t thread_id(void)
{
    if (UNLIKELY(!tl_tid))
        tl_tid = (pid_t)syscall(SYS_gettid);
    return (uint32_t)tl_tid;
}

/* Starts tracing, once (lifecycle.c). */
void init_once(void);

/* True when this call should be looked at: tracing is on and the tracer is not busy. */
static inline int active(void)
{
    int r = __atomic_load_n(&G.ready, __ATOMIC_ACQUIRE);
    if (UNLIKELY(r == 0)) {
        init_once();
        r = __atomic_load_n(&G.ready, __ATOMIC_ACQUIRE);
    }
    return r == 2 && !tl_busy;
}

/* A vfork child shares our memory and a raw clone has no atfork handlers: neither may
 * change the bookkeeping or write the parent's records. */
static inline int foreign_process(void) { return getpid() != G.pid; }

/* Descriptor state (the slot of fd; see state.c for the model). */
static inline uint32_t *fd_slot(int fd, int create)
{
    if (fd < 0)
        return NULL;
    return pool_at(&G.fds, (uint32_t)fd, create);
}

/* Lock-free look at a descriptor: FD_UNTRACED lets hot calls skip all bookkeeping. */
static inline uint32_t fd_peek(int fd)
{
    if (fd < 0 || (uint32_t)fd >= MAX_CHUNKS * CHUNK_ELEMS)
        return FD_UNTRACED;
    uint32_t *s = fd_slot(fd, 0);
    return s ? __atomic_load_n(s, __ATOMIC_RELAXED) : FD_UNKNOWN;
}

static inline ofd_t *ofd_get(uint32_t state) { return pool_at(&G.ofds, state - 2, 0); }

/* Whether a call on fd is worth timing (cheap, lock-free). */
static inline int watch(int fd) { return active() && fd_peek(fd) != FD_UNTRACED; }

/* ---- state.c: text, paths, descriptors ---- */
size_t put_dec(char *out, uint64_t v);
void normalise(const char *base, const char *path, char *out, size_t cap);
uint32_t intern_path(const char *text);
int path_selected(const char *path);
void fd_release(int fd);
void fd_assign(int fd, uint32_t v);
uint32_t classify(int fd, const char *hint, int dirfd, int append, int kernel_pos);
ofd_t *traced(int fd);

/* ---- output.c: the raw capture and the record buffer ---- */
void crc_init(void);
void flush_locked(void);
void push(uint32_t path, int op, int layer, int call, uint64_t off, uint64_t len,
          uint64_t t0, uint64_t t1);

/* ---- calls_posix.c ---- */
void forget(int first, int last);

#pragma GCC visibility pop

#endif
