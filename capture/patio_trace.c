/*
 * libpatio_trace.so — patio's LD_PRELOAD tracer.
 *
 * Loaded into an unmodified program (LD_PRELOAD, normally by `patio trace -- CMD`), it
 * records every read and write the program makes on regular files through the C
 * library — POSIX calls (read/write, pread/pwrite, readv/writev, preadv/pwritev and
 * their 64/v2 variants, plus the glibc _chk forms) and the stdio calls fread/fwrite —
 * as (op, path, offset, length, start, end, thread) and writes one "raw capture" file
 * per process image to $PATIO_TRACE_DIR/<host>.<pid>.<n>.praw (docs/FORMATS.md).
 * `patio trace merge` turns a directory of them into one patio trace. Without
 * PATIO_TRACE_DIR the library only passes calls through.
 *
 * Semantics decided here (also in docs/FORMATS.md, "Raw capture"):
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
static void *resolve(const char *name) { return dlsym(RTLD_NEXT, name); }
#define DECLARE_REAL(f) static __typeof__(f) *real_##f
#define REAL(f)                                                              \
    ({                                                                       \
        __typeof__(f) *p_ = __atomic_load_n(&real_##f, __ATOMIC_RELAXED);    \
        if (UNLIKELY(!p_)) {                                                 \
            p_ = (__typeof__(f) *)resolve(#f);                               \
            __atomic_store_n(&real_##f, p_, __ATOMIC_RELAXED);               \
        }                                                                    \
        p_;                                                                  \
    })

DECLARE_REAL(open); DECLARE_REAL(open64); DECLARE_REAL(openat); DECLARE_REAL(openat64);
DECLARE_REAL(__open_2); DECLARE_REAL(__open64_2); DECLARE_REAL(__openat_2);
DECLARE_REAL(__openat64_2); DECLARE_REAL(creat); DECLARE_REAL(creat64);
DECLARE_REAL(close); DECLARE_REAL(close_range);
DECLARE_REAL(read); DECLARE_REAL(__read_chk); DECLARE_REAL(write);
DECLARE_REAL(pread); DECLARE_REAL(pread64); DECLARE_REAL(__pread_chk);
DECLARE_REAL(__pread64_chk); DECLARE_REAL(pwrite); DECLARE_REAL(pwrite64);
DECLARE_REAL(readv); DECLARE_REAL(writev); DECLARE_REAL(preadv); DECLARE_REAL(preadv64);
DECLARE_REAL(pwritev); DECLARE_REAL(pwritev64); DECLARE_REAL(preadv2);
DECLARE_REAL(preadv64v2); DECLARE_REAL(pwritev2); DECLARE_REAL(pwritev64v2);
DECLARE_REAL(lseek); DECLARE_REAL(lseek64);
DECLARE_REAL(dup); DECLARE_REAL(dup2); DECLARE_REAL(dup3); DECLARE_REAL(fcntl);
DECLARE_REAL(fcntl64);
DECLARE_REAL(fopen); DECLARE_REAL(fopen64); DECLARE_REAL(fdopen); DECLARE_REAL(fclose);
DECLARE_REAL(fread); DECLARE_REAL(fread_unlocked); DECLARE_REAL(__fread_chk);
DECLARE_REAL(__fread_unlocked_chk); DECLARE_REAL(fwrite); DECLARE_REAL(fwrite_unlocked);
DECLARE_REAL(ftello);
DECLARE_REAL(execve); DECLARE_REAL(execv); DECLARE_REAL(execvp); DECLARE_REAL(execvpe);
DECLARE_REAL(fexecve); DECLARE_REAL(_exit); DECLARE_REAL(_Exit);
DECLARE_REAL(sigaction); DECLARE_REAL(signal);

/* ---- memory: fixed-size elements in mmap'd chunks that never move ---- */
#define CHUNK_BITS 12
#define CHUNK_ELEMS (1u << CHUNK_BITS)
#define MAX_CHUNKS 4096u /* 16 Mi elements */

typedef struct {
    void *chunks[MAX_CHUNKS];
    size_t elem;
} pool_t;

static void *map_bytes(size_t n)
{
    void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

/* Element i, or NULL; `create` (under the lock) maps its chunk when missing. */
static void *pool_at(pool_t *p, uint32_t i, int create)
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
    uint8_t kernel_pos;  /* ask the kernel for the position (see the file comment) */
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

static struct {
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
} G;

static __thread int tl_busy __attribute__((tls_model("initial-exec")));
static __thread pid_t tl_tid __attribute__((tls_model("initial-exec")));

static const int fatal_signals[] = {SIGSEGV, SIGBUS, SIGABRT, SIGTERM, SIGINT};

static void lock(void)
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

static void unlock(void) { __atomic_store_n(&G.lock, 0, __ATOMIC_RELEASE); }

static void enter(void)
{
    tl_busy++;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
}

static void leave(void)
{
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    tl_busy--;
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint32_t thread_id(void)
{
    if (UNLIKELY(!tl_tid))
        tl_tid = (pid_t)syscall(SYS_gettid);
    return (uint32_t)tl_tid;
}

static void init_once(void);

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
static int foreign_process(void) { return getpid() != G.pid; }

/* ---- small text helpers (no stdio: usable from signal handlers) ---- */
static size_t put_dec(char *out, uint64_t v)
{
    char tmp[24];
    size_t n = 0, i;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    for (i = 0; i < n; i++)
        out[i] = tmp[n - 1 - i];
    return n;
}

/* Absolute, lexically normalised form of `path` (relative to `base`) into out. */
static void normalise(const char *base, const char *path, char *out, size_t cap)
{
    char tmp[2 * PATH_MAX];
    size_t n = 0, o = 0, i;
    if (path[0] != '/' && base) {
        size_t b = strnlen(base, PATH_MAX);
        memcpy(tmp, base, b);
        n = b;
        tmp[n++] = '/';
    }
    i = strnlen(path, PATH_MAX);
    memcpy(tmp + n, path, i);
    n += i;
    tmp[n] = 0;
    /* collapse //, /./ and /../ */
    out[o++] = '/';
    for (i = 0; i < n;) {
        size_t j;
        while (i < n && tmp[i] == '/')
            i++;
        j = i;
        while (j < n && tmp[j] != '/')
            j++;
        if (j == i)
            break;
        if (j - i == 1 && tmp[i] == '.') {
        } else if (j - i == 2 && tmp[i] == '.' && tmp[i + 1] == '.') {
            while (o > 1 && out[o - 1] != '/')
                o--;
            if (o > 1)
                o--;
        } else if (o + (j - i) + 2 < cap) {
            if (o > 1)
                out[o++] = '/';
            memcpy(out + o, tmp + i, j - i);
            o += j - i;
        }
        i = j;
    }
    out[o] = 0;
}

/* ---- paths ---- */
static uint64_t hash_bytes(const char *s, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
    return h;
}

/* Id of `text`, added on first sight; UINT32_MAX when memory ran out. Under the lock. */
static uint32_t intern_path(const char *text)
{
    size_t n = strnlen(text, PATH_MAX);
    uint64_t h = hash_bytes(text, n);
    uint32_t *head = &G.buckets[h & (HASH_BUCKETS - 1)];
    for (uint32_t id = *head; id; ) {
        path_t *p = pool_at(&G.paths, id - 1, 0);
        if (p->hash == h && p->len == n && memcmp(p->text, text, n) == 0)
            return id - 1;
        id = p->next;
    }
    if (G.arena_left < n + 1) {
        if (!(G.arena = map_bytes(ARENA_BYTES)))
            return UINT32_MAX;
        G.arena_left = ARENA_BYTES;
    }
    path_t *p = pool_at(&G.paths, G.npaths, 1);
    if (!p)
        return UINT32_MAX;
    memcpy(G.arena, text, n);
    G.arena[n] = 0;
    p->text = G.arena;
    G.arena += n + 1;
    G.arena_left -= n + 1;
    p->len = (uint32_t)n;
    p->hash = h;
    p->next = *head;
    *head = ++G.npaths;
    return G.npaths - 1;
}

static int path_selected(const char *path)
{
    if (!G.only_len)
        return 1;
    if (strncmp(path, G.only, G.only_len) != 0)
        return 0;
    return G.only_len == 1 || path[G.only_len] == '/' || path[G.only_len] == 0;
}

/* ---- descriptors ---- */
static uint32_t *fd_slot(int fd, int create)
{
    if (fd < 0)
        return NULL;
    return pool_at(&G.fds, (uint32_t)fd, create);
}

/* Lock-free look at a descriptor: FD_UNTRACED lets hot calls skip all bookkeeping. */
static uint32_t fd_peek(int fd)
{
    if (fd < 0 || (uint32_t)fd >= MAX_CHUNKS * CHUNK_ELEMS)
        return FD_UNTRACED;
    uint32_t *s = fd_slot(fd, 0);
    return s ? __atomic_load_n(s, __ATOMIC_RELAXED) : FD_UNKNOWN;
}

static ofd_t *ofd_get(uint32_t state) { return pool_at(&G.ofds, state - 2, 0); }

static uint32_t ofd_new(uint32_t path, int append, int kernel_pos)
{
    uint32_t i;
    ofd_t *o;
    if (G.free_ofd) {
        i = G.free_ofd - 1;
        o = pool_at(&G.ofds, i, 0);
        G.free_ofd = o->next_free;
    } else {
        i = G.nofd;
        if (!(o = pool_at(&G.ofds, i, 1)))
            return FD_UNTRACED;
        G.nofd++;
    }
    o->offset = 0;
    o->path = path;
    o->refs = 0; /* fd_assign counts the descriptors */
    o->next_free = 0;
    o->append = (uint8_t)append;
    o->kernel_pos = (uint8_t)kernel_pos;
    return i + 2;
}

/* Under the lock: the descriptor stops pointing at its description. */
static void fd_release(int fd)
{
    uint32_t *s = fd_slot(fd, 0);
    if (!s)
        return;
    uint32_t v = *s;
    if (v >= 2) {
        ofd_t *o = ofd_get(v);
        if (o && --o->refs == 0) {
            o->next_free = G.free_ofd;
            G.free_ofd = v - 1;
        }
    }
    __atomic_store_n(s, FD_UNKNOWN, __ATOMIC_RELAXED);
}

static void fd_assign(int fd, uint32_t v)
{
    uint32_t *s = fd_slot(fd, 1);
    if (!s)
        return;
    if (v >= 2)
        ofd_get(v)->refs++;
    fd_release(fd);
    if (fd > G.max_fd)
        G.max_fd = fd;
    __atomic_store_n(s, v, __ATOMIC_RELAXED);
}

/* The path the kernel has for fd (absolute, symlinks resolved), or "" */
static void fd_path(int fd, char *out, size_t cap)
{
    char link[64] = "/proc/self/fd/";
    size_t n = strlen(link);
    n += put_dec(link + n, (uint64_t)fd);
    link[n] = 0;
    ssize_t r = readlink(link, out, cap - 1);
    out[r > 0 ? r : 0] = 0;
}

/* Under the lock: state for a descriptor that was just opened (`hint`: the path the
 * program gave, `dirfd` the directory it is relative to) or, with hint NULL, one met
 * for the first time (inherited, or opened before the library started). */
static uint32_t classify(int fd, const char *hint, int dirfd, int append, int kernel_pos)
{
    struct stat st;
    char path[PATH_MAX];
    if (fstat(fd, &st) != 0 || !(S_ISREG(st.st_mode) || S_ISBLK(st.st_mode)))
        return FD_UNTRACED;
    fd_path(fd, path, sizeof path);
    if (path[0] != '/' && hint) {
        char base[PATH_MAX] = "";
        if (hint[0] != '/') {
            if (dirfd == AT_FDCWD) {
                if (!getcwd(base, sizeof base))
                    base[0] = 0;
            } else {
                fd_path(dirfd, base, sizeof base);
            }
        }
        normalise(base[0] ? base : NULL, hint, path, sizeof path);
    }
    if (path[0] != '/' || !path_selected(path))
        return FD_UNTRACED;
    uint32_t id = intern_path(path);
    if (id == UINT32_MAX)
        return FD_UNTRACED;
    return ofd_new(id, append, kernel_pos);
}

/* Under the lock: the description behind fd, classifying unknown descriptors. */
static ofd_t *traced(int fd)
{
    uint32_t *s = fd_slot(fd, 1);
    if (!s)
        return NULL;
    uint32_t v = *s;
    if (v == FD_UNKNOWN) {
        int fl = REAL(fcntl)(fd, F_GETFL);
        v = classify(fd, NULL, AT_FDCWD, fl >= 0 && (fl & O_APPEND), 1);
        fd_assign(fd, v);
    }
    return v >= 2 ? ofd_get(v) : NULL;
}

/* ---- output ---- */
#if defined(__x86_64__)
static int have_crc_hw;
#endif

static void crc_init(void)
{
#if defined(__x86_64__)
    __builtin_cpu_init();
    have_crc_hw = __builtin_cpu_supports("sse4.2");
#endif
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = (c >> 1) ^ (0x82F63B78u & (0u - (c & 1)));
        G.crc_table[i] = c;
    }
}

#if defined(__x86_64__)
/* The SSE4.2 crc32 instruction computes CRC32C; used when the CPU has it. */
__attribute__((target("sse4.2"))) static uint32_t crc32c_hw(const unsigned char *p, size_t n)
{
    uint64_t c = 0xFFFFFFFFu;
    for (; n >= 8; p += 8, n -= 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        c = __builtin_ia32_crc32di(c, v);
    }
    uint32_t c32 = (uint32_t)c;
    while (n--)
        c32 = __builtin_ia32_crc32qi(c32, *p++);
    return c32 ^ 0xFFFFFFFFu;
}
#endif

static uint32_t crc32c(const unsigned char *p, size_t n)
{
#if defined(__x86_64__)
    if (have_crc_hw)
        return crc32c_hw(p, n);
#endif
    uint32_t c = 0xFFFFFFFFu;
    while (n--)
        c = G.crc_table[(c ^ *p++) & 0xFF] ^ (c >> 8);
    return c ^ 0xFFFFFFFFu;
}

static unsigned char *put16(unsigned char *p, uint16_t v)
{
    p[0] = (unsigned char)v;
    p[1] = (unsigned char)(v >> 8);
    return p + 2;
}

static unsigned char *put32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
    return p + 4;
}

static unsigned char *put64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)(v >> (8 * i));
    return p + 8;
}

static int write_all(int fd, const unsigned char *p, size_t n)
{
    while (n) {
        ssize_t w = REAL(write)(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Writes the frame whose payload is stage[8 .. end). */
static int emit_frame(int fd, unsigned char *end)
{
    size_t len = (size_t)(end - G.stage) - 8;
    put32(G.stage, (uint32_t)len);
    put32(G.stage + 4, crc32c(G.stage + 8, len));
    return write_all(fd, G.stage, len + 8);
}

/* Creates this process image's file (<dir>/<host>.<pid>.<n>.praw, the first free n)
 * with its header and process frame, and returns it open; -1 on failure. */
static int create_output(void)
{
    char *name = G.out_name;
    size_t base = strlen(G.dir), n;
    int fd = -1, made_dir = 0;
    if (base + 300 >= sizeof G.out_name)
        return -1;
    memcpy(name, G.dir, base);
    name[base++] = '/';
    n = strlen(G.host);
    memcpy(name + base, G.host, n);
    base += n;
    name[base++] = '.';
    base += put_dec(name + base, (uint64_t)G.pid);
    name[base++] = '.';
    for (int tries = 0; tries < 100000 && fd < 0; tries++, G.file_seq++) {
        n = base + put_dec(name + base, G.file_seq);
        memcpy(name + n, ".praw", 6);
        fd = REAL(open)(name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        if (fd < 0 && errno == ENOENT && !made_dir) {
            /* The directory is missing: create it (one level) and retry the name. */
            made_dir = 1;
            if (mkdir(G.dir, 0777) == 0 || errno == EEXIST) {
                tries--, G.file_seq--;
                continue;
            }
        }
        if (fd < 0 && errno != EEXIST)
            return -1;
    }
    if (fd < 0)
        return -1;
    G.have_name = 1;
    /* process frame (the 8-byte file header is written first, below) */
    unsigned char *p = G.stage + 8;
    *p++ = FRAME_PROCESS;
    *p++ = 0; /* clock: 0 = CLOCK_REALTIME */
    p = put16(p, RECORD_BYTES);
    p = put32(p, (uint32_t)G.rank);
    p = put32(p, (uint32_t)G.pid);
    p = put32(p, (uint32_t)G.ppid);
    p = put64(p, G.init_ns);
    n = strlen(G.host);
    p = put16(p, (uint16_t)n);
    memcpy(p, G.host, n);
    p += n;
    n = strlen(G.exe);
    p = put16(p, (uint16_t)n);
    memcpy(p, G.exe, n);
    p += n;
    static const unsigned char header[8] = {'P', 'R', 'A', 'W', PRAW_VERSION, 0, 0, 0};
    if (write_all(fd, header, sizeof header) != 0 ||
        emit_frame(fd, p) != 0) {
        REAL(close)(fd);
        return -1;
    }
    return fd;
}

/* Under the lock (or from a fatal signal): writes new paths and all buffered records. */
static void flush_locked(void)
{
    uint32_t nrec = __atomic_load_n(&G.nrec, __ATOMIC_ACQUIRE);
    int fd = -1;
    if (nrec == 0 || G.out_failed || !G.stage)
        goto done;
    if (foreign_process())
        goto done; /* a child made without fork handlers (clone, _Fork): not its file */
    fd = G.have_name ? REAL(open)(G.out_name, O_WRONLY | O_APPEND | O_CLOEXEC)
                     : create_output();
    if (fd < 0)
        goto fail;
    while (G.paths_written < G.npaths) {
        unsigned char *p = G.stage + 8, *count;
        uint32_t k = 0;
        *p++ = FRAME_PATHS;
        count = p;
        p += 4;
        while (G.paths_written < G.npaths) {
            path_t *e = pool_at(&G.paths, G.paths_written, 0);
            if (k && (size_t)(p - G.stage) + e->len + 16 > PATHS_FRAME_LIMIT)
                break;
            p = put32(p, G.paths_written);
            p = put32(p, e->len);
            memcpy(p, e->text, e->len);
            p += e->len;
            G.paths_written++;
            k++;
        }
        put32(count, k);
        if (emit_frame(fd, p) != 0)
            goto fail;
    }
    for (uint32_t at = 0; at < nrec;) {
        uint32_t k = nrec - at < RECORDS_PER_FRAME ? nrec - at : RECORDS_PER_FRAME;
        unsigned char *p = G.stage + 8;
        *p++ = FRAME_RECORDS;
        p = put32(p, k);
        for (uint32_t i = 0; i < k; i++) {
            const rec_t *r = &G.recs[at + i];
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
            /* off, len, t0, t1, path, tid are adjacent in rec_t: 40 bytes as stored */
            memcpy(p, &r->off, 40);
            p += 40;
#else
            p = put64(p, r->off);
            p = put64(p, r->len);
            p = put64(p, r->t0);
            p = put64(p, r->t1);
            p = put32(p, r->path);
            p = put32(p, r->tid);
#endif
            *p++ = r->op;
            *p++ = r->layer;
            *p++ = r->call;
            *p++ = 0;
        }
        if (emit_frame(fd, p) != 0)
            goto fail;
        at += k;
    }
    goto done;
fail:
    /* No room or no directory: keep the program running, stop writing. */
    G.out_failed = 1;
done:
    if (fd >= 0)
        REAL(close)(fd);
    __atomic_store_n(&G.nrec, 0, __ATOMIC_RELEASE);
}

/* ---- recording ---- */
static void push(uint32_t path, int op, int layer, int call, uint64_t off, uint64_t len,
                 uint64_t t0, uint64_t t1)
{
    if (G.nrec >= G.cap)
        flush_locked();
    rec_t *r = &G.recs[G.nrec];
    r->off = off;
    r->len = len;
    r->t0 = t0;
    r->t1 = t1;
    r->path = path;
    r->tid = thread_id();
    r->op = (uint8_t)op;
    r->layer = (uint8_t)layer;
    r->call = (uint8_t)call;
    __atomic_store_n(&G.nrec, G.nrec + 1, __ATOMIC_RELEASE);
    if (G.after_exit)
        flush_locked();
}

/* A request recorded by another layer (libpatio_mpiio.so: MPI-IO calls, layer MPIIO,
 * call codes 11-24 and 31-44 of docs/FORMATS.md) on the file at absolute path `path`.
 * Returns 1 when recorded, 0 when not (tracing off, path not selected, tracer busy). */
EXPORT int patio_trace_record_external(const char *path, int op, uint64_t offset, uint64_t length,
                                       uint64_t t0_ns, uint64_t t1_ns, int call)
{
    if (!path || !active() || foreign_process() || (op != OP_READ && op != OP_WRITE) ||
        offset + length < offset)
        return 0;
    int saved = errno, done = 0;
    char norm[PATH_MAX];
    normalise(NULL, path, norm, sizeof norm);
    if (path[0] != '/' || !path_selected(norm)) {
        errno = saved;
        return 0;
    }
    enter();
    lock();
    uint32_t id = intern_path(norm);
    if (id != UINT32_MAX) {
        push(id, op, LAYER_MPIIO, call, offset, length, t0_ns, t1_ns);
        done = 1;
    }
    unlock();
    leave();
    errno = saved;
    return done;
}

/* A call that used and advanced the file position moved `n` bytes. */
static void note_seq(int fd, int op, int call, ssize_t n, uint64_t t0, uint64_t t1)
{
    int saved = errno;
    enter();
    lock();
    ofd_t *o = traced(fd);
    if (o) {
        int64_t at;
        if (o->kernel_pos || (o->append && op == OP_WRITE)) {
            off64_t pos = REAL(lseek64)(fd, 0, SEEK_CUR);
            at = pos >= n ? pos - n : -1;
            if (pos >= 0)
                o->offset = pos;
        } else {
            at = o->offset;
            o->offset += n;
        }
        if (at >= 0)
            push(o->path, op, LAYER_POSIX, call, (uint64_t)at, (uint64_t)n, t0, t1);
    }
    unlock();
    leave();
    errno = saved;
}

/* A positioned call (pread/pwrite family) moved `n` bytes at `off`. */
static void note_at(int fd, int op, int call, int64_t off, ssize_t n, int append,
                    uint64_t t0, uint64_t t1)
{
    int saved = errno;
    enter();
    lock();
    ofd_t *o = traced(fd);
    if (o) {
        if (op == OP_WRITE && (append || o->append)) {
            /* Linux appends positioned writes on O_APPEND descriptions. */
            struct stat st;
            off = fstat(fd, &st) == 0 && st.st_size >= n ? st.st_size - n : -1;
        }
        if (off >= 0)
            push(o->path, op, LAYER_POSIX, call, (uint64_t)off, (uint64_t)n, t0, t1);
    }
    unlock();
    leave();
    errno = saved;
}

/* Whether a call on fd is worth timing (cheap, lock-free). */
static inline int watch(int fd) { return active() && fd_peek(fd) != FD_UNTRACED; }

/* ---- initialisation, exit, fork, signals ---- */
static void flush_now(void)
{
    int saved = errno;
    enter();
    lock();
    flush_locked();
    unlock();
    leave();
    errno = saved;
}

/* Fatal signals. Where the program leaves a fatal signal at its default action, the
 * tracer's handler flushes and then lets the default action happen. The program keeps
 * seeing its own disposition: sigaction/signal report SIG_DFL (with the flags and mask
 * it set) while the tracer's handler stands in for it, and the program's first real
 * handler replaces the tracer's (the program then decides how to end). */
static int is_fatal(int sig)
{
    for (size_t i = 0; i < sizeof fatal_signals / sizeof fatal_signals[0]; i++)
        if (fatal_signals[i] == sig)
            return 1;
    return 0;
}

static int is_default(const struct sigaction *act)
{
    return !(act->sa_flags & SA_SIGINFO) && act->sa_handler == SIG_DFL;
}

static void on_fatal(int sig, siginfo_t *info, void *ctx)
{
    (void)info;
    (void)ctx;
    int saved = errno;
    if (__atomic_load_n(&G.ready, __ATOMIC_ACQUIRE) == 2 && getpid() == G.pid) {
        /* Interrupted inside the tracer: the lock may be ours; write what is complete. */
        int mine = tl_busy > 0;
        int got = 0;
        tl_busy++;
        if (!mine)
            for (long spins = 0; spins < 2000000 && !got; spins++) {
                got = !__atomic_exchange_n(&G.lock, 1, __ATOMIC_ACQUIRE);
                if (!got && spins > 1000)
                    sched_yield();
            }
        flush_locked();
        if (got)
            unlock();
        tl_busy--;
    }
    G.hooked[sig] = 0;
    REAL(sigaction)(sig, &G.old_act[sig], NULL);
    errno = saved;
    raise(sig); /* blocked until this handler returns, then the default action */
}

static void tracer_action(struct sigaction *act)
{
    memset(act, 0, sizeof *act);
    act->sa_sigaction = on_fatal;
    act->sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&act->sa_mask);
}

static void hook_signals(void)
{
    for (size_t i = 0; i < sizeof fatal_signals / sizeof fatal_signals[0]; i++) {
        int sig = fatal_signals[i];
        struct sigaction old, act;
        if (REAL(sigaction)(sig, NULL, &old) != 0 || !is_default(&old))
            continue; /* ignored or handled by the program: its business */
        tracer_action(&act);
        G.old_act[sig] = old;
        if (REAL(sigaction)(sig, &act, NULL) == 0)
            G.hooked[sig] = 1;
    }
}

EXPORT int sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
    if (sig <= 0 || sig >= NSIG || !is_fatal(sig) || !active())
        return REAL(sigaction)(sig, act, old);
    if (G.hooked[sig]) {
        struct sigaction view = G.old_act[sig];
        if (act && !is_default(act)) {
            int r = REAL(sigaction)(sig, act, NULL);
            if (r != 0)
                return r;
            G.hooked[sig] = 0;
        } else if (act) {
            G.old_act[sig] = *act;
        }
        if (old)
            *old = view;
        return 0;
    }
    if (act && is_default(act)) {
        /* Back to the default action: the tracer's handler stands in again. */
        struct sigaction ours;
        tracer_action(&ours);
        int r = REAL(sigaction)(sig, &ours, old);
        if (r == 0) {
            G.old_act[sig] = *act;
            G.hooked[sig] = 1;
        }
        return r;
    }
    return REAL(sigaction)(sig, act, old);
}

/* signal() with glibc's (BSD) semantics, through the sigaction above. */
EXPORT sighandler_t signal(int sig, sighandler_t handler)
{
    if (sig <= 0 || sig >= NSIG || !is_fatal(sig) || !active())
        return REAL(signal)(sig, handler);
    struct sigaction act, old;
    memset(&act, 0, sizeof act);
    act.sa_handler = handler;
    act.sa_flags = SA_RESTART;
    sigemptyset(&act.sa_mask);
    sigaddset(&act.sa_mask, sig);
    if (sigaction(sig, &act, &old) != 0)
        return SIG_ERR;
    return (old.sa_flags & SA_SIGINFO) ? (sighandler_t)(void (*)(void))old.sa_sigaction : old.sa_handler;
}

static void describe_process(void)
{
    G.pid = getpid();
    G.ppid = getppid();
    G.file_seq = 0;
    G.have_name = 0;
    G.out_failed = 0;
    G.paths_written = 0;
    G.nrec = 0;
    tl_tid = 0;
}

/* Descriptions are now shared with another process: only the kernel knows positions. */
static void share_all_descriptions(void)
{
    for (uint32_t i = 0; i < G.nofd; i++) {
        ofd_t *o = pool_at(&G.ofds, i, 0);
        if (o && o->refs)
            o->kernel_pos = 1;
    }
}

/* fork: the lock is held across it so the child's copy of the state is consistent
 * (unless fork is called by a signal handler that interrupted the tracer, which holds
 * it already). */
static __thread int tl_fork_locked __attribute__((tls_model("initial-exec")));

static void before_fork(void)
{
    tl_fork_locked = __atomic_load_n(&G.ready, __ATOMIC_ACQUIRE) == 2 && !tl_busy;
    if (!tl_fork_locked)
        return;
    enter();
    lock();
}

static void after_fork_parent(void)
{
    if (!tl_fork_locked)
        return;
    share_all_descriptions();
    unlock();
    leave();
}

static void after_fork_child(void)
{
    if (__atomic_load_n(&G.ready, __ATOMIC_ACQUIRE) != 2)
        return;
    describe_process();
    share_all_descriptions();
    if (tl_fork_locked) {
        unlock();
        leave();
    }
}

static int32_t launcher_rank(void)
{
    static const char *vars[] = {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK",
                                 "SLURM_PROCID"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *v = getenv(vars[i]);
        char *end;
        if (!v || !*v)
            continue;
        long r = strtol(v, &end, 10);
        if (*end == 0 && r >= 0 && r <= INT32_MAX)
            return (int32_t)r;
    }
    return -1;
}

/* Resolves every real function now, while the process is (normally) single-threaded:
 * dlsym takes the loader's lock, and must never be called under the tracer's lock (a
 * library constructor running under the loader's lock may do I/O). */
static void resolve_all(void)
{
    (void)REAL(open);
    (void)REAL(open64);
    (void)REAL(openat);
    (void)REAL(openat64);
    (void)REAL(__open_2);
    (void)REAL(__open64_2);
    (void)REAL(__openat_2);
    (void)REAL(__openat64_2);
    (void)REAL(creat);
    (void)REAL(creat64);
    (void)REAL(close);
    (void)REAL(close_range);
    (void)REAL(read);
    (void)REAL(__read_chk);
    (void)REAL(write);
    (void)REAL(pread);
    (void)REAL(pread64);
    (void)REAL(__pread_chk);
    (void)REAL(__pread64_chk);
    (void)REAL(pwrite);
    (void)REAL(pwrite64);
    (void)REAL(readv);
    (void)REAL(writev);
    (void)REAL(preadv);
    (void)REAL(preadv64);
    (void)REAL(pwritev);
    (void)REAL(pwritev64);
    (void)REAL(preadv2);
    (void)REAL(preadv64v2);
    (void)REAL(pwritev2);
    (void)REAL(pwritev64v2);
    (void)REAL(lseek);
    (void)REAL(lseek64);
    (void)REAL(dup);
    (void)REAL(dup2);
    (void)REAL(dup3);
    (void)REAL(fcntl);
    (void)REAL(fcntl64);
    (void)REAL(fopen);
    (void)REAL(fopen64);
    (void)REAL(fdopen);
    (void)REAL(fclose);
    (void)REAL(fread);
    (void)REAL(fread_unlocked);
    (void)REAL(__fread_chk);
    (void)REAL(__fread_unlocked_chk);
    (void)REAL(fwrite);
    (void)REAL(fwrite_unlocked);
    (void)REAL(ftello);
    (void)REAL(execve);
    (void)REAL(execv);
    (void)REAL(execvp);
    (void)REAL(execvpe);
    (void)REAL(fexecve);
    (void)REAL(_exit);
    (void)REAL(_Exit);
    (void)REAL(sigaction);
    (void)REAL(signal);
}

static void init_once(void)
{
    int expected = 0;
    if (!__atomic_compare_exchange_n(&G.ready, &expected, 1, 0, __ATOMIC_ACQ_REL,
                                     __ATOMIC_ACQUIRE))
        return;
    int saved = errno;
    int state = 3;
    tl_busy++;
    const char *dir = getenv("PATIO_TRACE_DIR");
    if (!dir || !*dir)
        goto out;
    char cwd[PATH_MAX];
    normalise(dir[0] == '/' ? NULL : getcwd(cwd, sizeof cwd), dir, G.dir, sizeof G.dir);
    const char *only = getenv("PATIO_TRACE_ONLY");
    if (only && *only) {
        if (!realpath(only, G.only))
            normalise(only[0] == '/' ? NULL : getcwd(cwd, sizeof cwd), only, G.only,
                      sizeof G.only);
        G.only_len = strlen(G.only);
        while (G.only_len > 1 && G.only[G.only_len - 1] == '/')
            G.only[--G.only_len] = 0;
    }
    const char *cap = getenv("PATIO_TRACE_BUFFER");
    G.cap = DEFAULT_BUFFER;
    if (cap && *cap) {
        long c = strtol(cap, NULL, 10);
        if (c >= 1 && c <= (1l << 24))
            G.cap = (uint32_t)c;
    }
    G.fds.elem = sizeof(uint32_t);
    G.ofds.elem = sizeof(ofd_t);
    G.paths.elem = sizeof(path_t);
    G.recs = map_bytes((size_t)G.cap * sizeof(rec_t));
    G.buckets = map_bytes(HASH_BUCKETS * sizeof(uint32_t));
    G.stage = map_bytes(STAGE_BYTES);
    if (!G.recs || !G.buckets || !G.stage)
        goto out;
    if (gethostname(G.host, sizeof G.host - 1) != 0 || !G.host[0])
        memcpy(G.host, "localhost", 10);
    for (char *c = G.host; *c; c++)
        if (*c == '/')
            *c = '_';
    ssize_t n = readlink("/proc/self/exe", G.exe, sizeof G.exe - 1);
    G.exe[n > 0 ? n : 0] = 0;
    resolve_all();
    G.rank = launcher_rank();
    G.init_ns = now_ns();
    crc_init();
    describe_process();
    G.max_fd = -1;
    pthread_atfork(before_fork, after_fork_parent, after_fork_child);
    hook_signals();
    state = 2;
out:
    tl_busy--;
    __atomic_store_n(&G.ready, state, __ATOMIC_RELEASE);
    errno = saved;
}

__attribute__((constructor)) static void patio_trace_start(void) { init_once(); }

__attribute__((destructor)) static void patio_trace_stop(void)
{
    if (__atomic_load_n(&G.ready, __ATOMIC_ACQUIRE) != 2 || foreign_process())
        return;
    flush_now();
    /* Requests made by later destructors are written one frame at a time. */
    G.after_exit = 1;
}

static void flush_for_exit_or_exec(void)
{
    if (__atomic_load_n(&G.ready, __ATOMIC_ACQUIRE) == 2 && !tl_busy && !foreign_process())
        flush_now();
}

/* ---- open / close / dup ---- */
static int opened(int fd, const char *path, int dirfd, int flags)
{
    if (fd < 0 || foreign_process())
        return fd;
    int saved = errno;
    enter();
    lock();
    fd_assign(fd, classify(fd, path, dirfd, (flags & O_APPEND) != 0, 0));
    unlock();
    leave();
    errno = saved;
    return fd;
}

#define OPEN_MODE(flags, mode)                        \
    do {                                              \
        if ((flags) & (O_CREAT | __O_TMPFILE)) {      \
            va_list ap;                               \
            va_start(ap, flags);                      \
            mode = va_arg(ap, mode_t);                \
            va_end(ap);                               \
        }                                             \
    } while (0)

EXPORT int open(const char *path, int flags, ...)
{
    mode_t mode = 0;
    OPEN_MODE(flags, mode);
    int fd = REAL(open)(path, flags, mode);
    return active() ? opened(fd, path, AT_FDCWD, flags) : fd;
}

EXPORT int open64(const char *path, int flags, ...)
{
    mode_t mode = 0;
    OPEN_MODE(flags, mode);
    int fd = REAL(open64)(path, flags, mode);
    return active() ? opened(fd, path, AT_FDCWD, flags) : fd;
}

EXPORT int openat(int dirfd, const char *path, int flags, ...)
{
    mode_t mode = 0;
    OPEN_MODE(flags, mode);
    int fd = REAL(openat)(dirfd, path, flags, mode);
    return active() ? opened(fd, path, dirfd, flags) : fd;
}

EXPORT int openat64(int dirfd, const char *path, int flags, ...)
{
    mode_t mode = 0;
    OPEN_MODE(flags, mode);
    int fd = REAL(openat64)(dirfd, path, flags, mode);
    return active() ? opened(fd, path, dirfd, flags) : fd;
}

EXPORT int __open_2(const char *path, int flags)
{
    int fd = REAL(__open_2)(path, flags);
    return active() ? opened(fd, path, AT_FDCWD, flags) : fd;
}

EXPORT int __open64_2(const char *path, int flags)
{
    int fd = REAL(__open64_2)(path, flags);
    return active() ? opened(fd, path, AT_FDCWD, flags) : fd;
}

EXPORT int __openat_2(int dirfd, const char *path, int flags)
{
    int fd = REAL(__openat_2)(dirfd, path, flags);
    return active() ? opened(fd, path, dirfd, flags) : fd;
}

EXPORT int __openat64_2(int dirfd, const char *path, int flags)
{
    int fd = REAL(__openat64_2)(dirfd, path, flags);
    return active() ? opened(fd, path, dirfd, flags) : fd;
}

EXPORT int creat(const char *path, mode_t mode)
{
    int fd = REAL(creat)(path, mode);
    return active() ? opened(fd, path, AT_FDCWD, O_WRONLY) : fd;
}

EXPORT int creat64(const char *path, mode_t mode)
{
    int fd = REAL(creat64)(path, mode);
    return active() ? opened(fd, path, AT_FDCWD, O_WRONLY) : fd;
}

/* Forgets descriptors [first, last] before they are closed (so that a number reused by
 * another thread's open is never forgotten after being registered). */
static void forget(int first, int last)
{
    if (!active() || foreign_process())
        return;
    int saved = errno;
    enter();
    lock();
    if (last > G.max_fd)
        last = G.max_fd;
    for (int fd = first; fd <= last; fd++)
        fd_release(fd);
    unlock();
    leave();
    errno = saved;
}

EXPORT int close(int fd)
{
    uint32_t state = fd_peek(fd);
    if (state == FD_UNTRACED && active() && !foreign_process()) {
        /* Not a traced description: no lock needed to forget it (the number cannot be
         * reused before the close). */
        uint32_t *s = fd_slot(fd, 0);
        if (s)
            __atomic_store_n(s, FD_UNKNOWN, __ATOMIC_RELAXED);
    } else if (state >= 2) {
        forget(fd, fd);
    }
    return REAL(close)(fd);
}

EXPORT int close_range(unsigned int first, unsigned int last, int flags)
{
    if (!REAL(close_range)) {
        errno = ENOSYS;
        return -1;
    }
    if (!(flags & CLOSE_RANGE_CLOEXEC) && first <= (unsigned)INT_MAX)
        forget((int)first, last > (unsigned)INT_MAX ? INT_MAX : (int)last);
    return REAL(close_range)(first, last, flags);
}

/* newfd now refers to oldfd's description. */
static int duplicated(int oldfd, int newfd)
{
    if (newfd < 0 || newfd == oldfd || !active() || foreign_process())
        return newfd;
    int saved = errno;
    enter();
    lock();
    uint32_t *s = fd_slot(oldfd, 0);
    fd_assign(newfd, s ? *s : FD_UNKNOWN);
    unlock();
    leave();
    errno = saved;
    return newfd;
}

EXPORT int dup(int fd) { return duplicated(fd, REAL(dup)(fd)); }
EXPORT int dup2(int fd, int fd2) { return duplicated(fd, REAL(dup2)(fd, fd2)); }
EXPORT int dup3(int fd, int fd2, int flags) { return duplicated(fd, REAL(dup3)(fd, fd2, flags)); }

static int fcntl_done(int fd, int cmd, void *arg, int r)
{
    if (r < 0)
        return r;
    if (cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC)
        return duplicated(fd, r);
    if (cmd == F_SETFL && active() && !foreign_process()) {
        int saved = errno;
        enter();
        lock();
        uint32_t *s = fd_slot(fd, 0);
        if (s && *s >= 2)
            ofd_get(*s)->append = ((long)arg & O_APPEND) != 0;
        unlock();
        leave();
        errno = saved;
    }
    return r;
}

EXPORT int fcntl(int fd, int cmd, ...)
{
    va_list ap;
    va_start(ap, cmd);
    void *arg = va_arg(ap, void *);
    va_end(ap);
    return fcntl_done(fd, cmd, arg, REAL(fcntl)(fd, cmd, arg));
}

EXPORT int fcntl64(int fd, int cmd, ...)
{
    va_list ap;
    va_start(ap, cmd);
    void *arg = va_arg(ap, void *);
    va_end(ap);
    return fcntl_done(fd, cmd, arg, REAL(fcntl64)(fd, cmd, arg));
}

/* ---- read / write ---- */
#define SEQ_IO(realcall, op, call)                          \
    do {                                                    \
        if (!watch(fd))                                     \
            return realcall;                                \
        uint64_t t0 = now_ns();                             \
        ssize_t r = realcall;                               \
        if (r >= 0)                                         \
            note_seq(fd, op, call, r, t0, now_ns());        \
        return r;                                           \
    } while (0)

#define AT_IO(realcall, op, call, off, append)                    \
    do {                                                          \
        if (!watch(fd))                                           \
            return realcall;                                      \
        uint64_t t0 = now_ns();                                   \
        ssize_t r = realcall;                                     \
        if (r >= 0)                                               \
            note_at(fd, op, call, off, r, append, t0, now_ns());  \
        return r;                                                 \
    } while (0)

EXPORT ssize_t read(int fd, void *buf, size_t n)
{
    SEQ_IO(REAL(read)(fd, buf, n), OP_READ, CALL_READ);
}

EXPORT ssize_t __read_chk(int fd, void *buf, size_t n, size_t buflen)
{
    SEQ_IO(REAL(__read_chk)(fd, buf, n, buflen), OP_READ, CALL_READ);
}

EXPORT ssize_t write(int fd, const void *buf, size_t n)
{
    SEQ_IO(REAL(write)(fd, buf, n), OP_WRITE, CALL_WRITE);
}

EXPORT ssize_t readv(int fd, const struct iovec *iov, int cnt)
{
    SEQ_IO(REAL(readv)(fd, iov, cnt), OP_READ, CALL_READV);
}

EXPORT ssize_t writev(int fd, const struct iovec *iov, int cnt)
{
    SEQ_IO(REAL(writev)(fd, iov, cnt), OP_WRITE, CALL_WRITEV);
}

EXPORT ssize_t pread(int fd, void *buf, size_t n, off_t off)
{
    AT_IO(REAL(pread)(fd, buf, n, off), OP_READ, CALL_PREAD, off, 0);
}

EXPORT ssize_t pread64(int fd, void *buf, size_t n, off64_t off)
{
    AT_IO(REAL(pread64)(fd, buf, n, off), OP_READ, CALL_PREAD, off, 0);
}

EXPORT ssize_t __pread_chk(int fd, void *buf, size_t n, off_t off, size_t buflen)
{
    AT_IO(REAL(__pread_chk)(fd, buf, n, off, buflen), OP_READ, CALL_PREAD, off, 0);
}

EXPORT ssize_t __pread64_chk(int fd, void *buf, size_t n, off64_t off, size_t buflen)
{
    AT_IO(REAL(__pread64_chk)(fd, buf, n, off, buflen), OP_READ, CALL_PREAD, off, 0);
}

EXPORT ssize_t pwrite(int fd, const void *buf, size_t n, off_t off)
{
    AT_IO(REAL(pwrite)(fd, buf, n, off), OP_WRITE, CALL_PWRITE, off, 0);
}

EXPORT ssize_t pwrite64(int fd, const void *buf, size_t n, off64_t off)
{
    AT_IO(REAL(pwrite64)(fd, buf, n, off), OP_WRITE, CALL_PWRITE, off, 0);
}

EXPORT ssize_t preadv(int fd, const struct iovec *iov, int cnt, off_t off)
{
    AT_IO(REAL(preadv)(fd, iov, cnt, off), OP_READ, CALL_PREADV, off, 0);
}

EXPORT ssize_t preadv64(int fd, const struct iovec *iov, int cnt, off64_t off)
{
    AT_IO(REAL(preadv64)(fd, iov, cnt, off), OP_READ, CALL_PREADV, off, 0);
}

EXPORT ssize_t pwritev(int fd, const struct iovec *iov, int cnt, off_t off)
{
    AT_IO(REAL(pwritev)(fd, iov, cnt, off), OP_WRITE, CALL_PWRITEV, off, 0);
}

EXPORT ssize_t pwritev64(int fd, const struct iovec *iov, int cnt, off64_t off)
{
    AT_IO(REAL(pwritev64)(fd, iov, cnt, off), OP_WRITE, CALL_PWRITEV, off, 0);
}

/* The v2 forms use (and move) the file position when the offset is -1. */
#define V2_IO(realcall, op, call)                                              \
    do {                                                                       \
        if (off == -1)                                                         \
            SEQ_IO(realcall, op, call);                                        \
        AT_IO(realcall, op, call, off, (op == OP_WRITE && (flags & RWF_APPEND))); \
    } while (0)

EXPORT ssize_t preadv2(int fd, const struct iovec *iov, int cnt, off_t off, int flags)
{
    V2_IO(REAL(preadv2)(fd, iov, cnt, off, flags), OP_READ, CALL_PREADV);
}

EXPORT ssize_t preadv64v2(int fd, const struct iovec *iov, int cnt, off64_t off, int flags)
{
    V2_IO(REAL(preadv64v2)(fd, iov, cnt, off, flags), OP_READ, CALL_PREADV);
}

EXPORT ssize_t pwritev2(int fd, const struct iovec *iov, int cnt, off_t off, int flags)
{
    V2_IO(REAL(pwritev2)(fd, iov, cnt, off, flags), OP_WRITE, CALL_PWRITEV);
}

EXPORT ssize_t pwritev64v2(int fd, const struct iovec *iov, int cnt, off64_t off, int flags)
{
    V2_IO(REAL(pwritev64v2)(fd, iov, cnt, off, flags), OP_WRITE, CALL_PWRITEV);
}

static off64_t seeked(int fd, off64_t r)
{
    if (r < 0 || !active() || fd_peek(fd) < 2)
        return r;
    int saved = errno;
    enter();
    lock();
    uint32_t *s = fd_slot(fd, 0);
    if (s && *s >= 2)
        ofd_get(*s)->offset = r;
    unlock();
    leave();
    errno = saved;
    return r;
}

EXPORT off_t lseek(int fd, off_t off, int whence)
{
    return seeked(fd, REAL(lseek)(fd, off, whence));
}

EXPORT off64_t lseek64(int fd, off64_t off, int whence)
{
    return seeked(fd, REAL(lseek64)(fd, off, whence));
}

/* ---- stdio ---- */

/* The stream's descriptor, -1 for streams without one (fmemopen…). Read from the
 * structure: fileno() would set errno for those. */
static inline int stream_fd(FILE *fp) { return fp->_fileno; }
static FILE *stdio_opened(FILE *fp, const char *path)
{
    if (!fp || !active() || foreign_process())
        return fp;
    int saved = errno;
    int fd = stream_fd(fp);
    enter();
    lock();
    /* stdio moves the kernel position itself: ask the kernel. */
    fd_assign(fd, classify(fd, path, AT_FDCWD, 0, 1));
    unlock();
    leave();
    errno = saved;
    return fp;
}

EXPORT FILE *fopen(const char *path, const char *mode)
{
    return stdio_opened(REAL(fopen)(path, mode), path);
}

EXPORT FILE *fopen64(const char *path, const char *mode)
{
    return stdio_opened(REAL(fopen64)(path, mode), path);
}

EXPORT FILE *fdopen(int fd, const char *mode)
{
    FILE *fp = REAL(fdopen)(fd, mode);
    if (fp && active() && !foreign_process()) {
        int saved = errno;
        enter();
        lock();
        ofd_t *o = traced(fd);
        if (o)
            o->kernel_pos = 1;
        unlock();
        leave();
        errno = saved;
    }
    return fp;
}

EXPORT int fclose(FILE *fp)
{
    if (fp && stream_fd(fp) >= 0)
        forget(stream_fd(fp), stream_fd(fp));
    return REAL(fclose)(fp);
}

static void note_stdio(FILE *fp, int op, int64_t before, size_t bytes, uint64_t t0,
                       uint64_t t1)
{
    int saved = errno;
    off64_t after = REAL(ftello)(fp);
    int fd = stream_fd(fp);
    if (after >= 0) {
        int64_t off, len;
        if (op == OP_READ) {
            off = before;
            len = after - before;
        } else {
            off = after - (int64_t)bytes;
            len = (int64_t)bytes;
        }
        enter();
        lock();
        ofd_t *o = traced(fd);
        if (o && off >= 0 && len >= 0)
            push(o->path, op, LAYER_STDIO, op == OP_READ ? CALL_FREAD : CALL_FWRITE,
                 (uint64_t)off, (uint64_t)len, t0, t1);
        unlock();
        leave();
    }
    errno = saved;
}

/* fread family: position before, the call, position after. A call that fails (no
 * item, error indicator set) is not recorded. */
#define STDIO_READ(realcall)                                                 \
    do {                                                                     \
        if (!fp || !watch(stream_fd(fp)))                                    \
            return realcall;                                                 \
        int saved = errno;                                                   \
        off64_t before = REAL(ftello)(fp);                                   \
        errno = saved;                                                       \
        if (before < 0)                                                      \
            return realcall;                                                 \
        uint64_t t0 = now_ns();                                              \
        size_t r = realcall;                                                 \
        uint64_t t1 = now_ns();                                              \
        if (r > 0 || !ferror(fp))                                            \
            note_stdio(fp, OP_READ, before, 0, t0, t1);                      \
        return r;                                                            \
    } while (0)

#define STDIO_WRITE(realcall, size)                                          \
    do {                                                                     \
        if (!watch(stream_fd(fp)))                                           \
            return realcall;                                                 \
        uint64_t t0 = now_ns();                                              \
        size_t r = realcall;                                                 \
        uint64_t t1 = now_ns();                                              \
        if (r > 0 || !ferror(fp))                                            \
            note_stdio(fp, OP_WRITE, 0, r * (size), t0, t1);                 \
        return r;                                                            \
    } while (0)

EXPORT size_t fread(void *ptr, size_t size, size_t n, FILE *fp)
{
    STDIO_READ(REAL(fread)(ptr, size, n, fp));
}

EXPORT size_t fread_unlocked(void *ptr, size_t size, size_t n, FILE *fp)
{
    STDIO_READ(REAL(fread_unlocked)(ptr, size, n, fp));
}

EXPORT size_t __fread_chk(void *ptr, size_t ptrlen, size_t size, size_t n, FILE *fp)
{
    STDIO_READ(REAL(__fread_chk)(ptr, ptrlen, size, n, fp));
}

EXPORT size_t __fread_unlocked_chk(void *ptr, size_t ptrlen, size_t size, size_t n, FILE *fp)
{
    STDIO_READ(REAL(__fread_unlocked_chk)(ptr, ptrlen, size, n, fp));
}

EXPORT size_t fwrite(const void *ptr, size_t size, size_t n, FILE *fp)
{
    STDIO_WRITE(REAL(fwrite)(ptr, size, n, fp), size);
}

EXPORT size_t fwrite_unlocked(const void *ptr, size_t size, size_t n, FILE *fp)
{
    STDIO_WRITE(REAL(fwrite_unlocked)(ptr, size, n, fp), size);
}

/* ---- exec and exit: write what this image recorded first ---- */
EXPORT int execve(const char *path, char *const argv[], char *const envp[])
{
    flush_for_exit_or_exec();
    return REAL(execve)(path, argv, envp);
}

EXPORT int execv(const char *path, char *const argv[])
{
    flush_for_exit_or_exec();
    return REAL(execv)(path, argv);
}

EXPORT int execvp(const char *file, char *const argv[])
{
    flush_for_exit_or_exec();
    return REAL(execvp)(file, argv);
}

EXPORT int execvpe(const char *file, char *const argv[], char *const envp[])
{
    flush_for_exit_or_exec();
    return REAL(execvpe)(file, argv, envp);
}

EXPORT int fexecve(int fd, char *const argv[], char *const envp[])
{
    flush_for_exit_or_exec();
    return REAL(fexecve)(fd, argv, envp);
}

/* execl family: the variadic arguments become an argv on the stack; execle's
 * environment follows the terminating NULL. */
#define COLLECT_ARGS(arg0, argv)                                             \
    size_t argc = 1;                                                         \
    va_list ap;                                                              \
    va_start(ap, arg0);                                                      \
    while (va_arg(ap, const char *))                                         \
        argc++;                                                              \
    va_end(ap);                                                              \
    char *argv[argc + 1];                                                    \
    argv[0] = (char *)(arg0);                                                \
    va_start(ap, arg0);                                                      \
    for (size_t i = 1; i <= argc; i++)                                       \
        argv[i] = va_arg(ap, char *)

EXPORT int execl(const char *path, const char *arg, ...)
{
    COLLECT_ARGS(arg, argv);
    va_end(ap);
    return execv(path, argv);
}

EXPORT int execlp(const char *file, const char *arg, ...)
{
    COLLECT_ARGS(arg, argv);
    va_end(ap);
    return execvp(file, argv);
}

EXPORT int execle(const char *path, const char *arg, ...)
{
    COLLECT_ARGS(arg, argv);
    char **envp = va_arg(ap, char **);
    va_end(ap);
    return execve(path, argv, envp);
}

EXPORT void _exit(int status)
{
    flush_for_exit_or_exec();
    REAL(_exit)(status);
    syscall(SYS_exit_group, status);
    __builtin_unreachable();
}

EXPORT void _Exit(int status)
{
    flush_for_exit_or_exec();
    REAL(_Exit)(status);
    syscall(SYS_exit_group, status);
    __builtin_unreachable();
}
