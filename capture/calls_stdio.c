/*
 * calls_stdio.c — the interposed stdio calls: fopen/fopen64/fdopen/fclose (descriptor
 * bookkeeping) and the fread/fwrite family (recorded from the stream position).
 */
#include "tracer.h"

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
