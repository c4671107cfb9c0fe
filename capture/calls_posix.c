/*
 * calls_posix.c — the interposed POSIX calls: open/creat forms, close, close_range, dup,
 * fcntl (bookkeeping of descriptors and descriptions), read/write and their vector,
 * positioned, v2 and _chk forms (recorded), and lseek (the modelled offset).
 */
#include "tracer.h"

/* ---- recording of POSIX calls ---- */
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
void forget(int first, int last)
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
