/* Known POSIX I/O for the tracer tests: strided pwrite/pread, plain read/write after
 * lseek, readv, dup, O_APPEND, a read at end of file, a failing call, pwritev.
 * Prints one line per request it makes, "read|write OFFSET LENGTH", computed from its
 * own plan (never from the file position), for the test to compare with the trace. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/uio.h>
#include <unistd.h>

static char buf[65536];

static void did(const char *op, long long off, long long len, long long got)
{
    if (got != len) {
        fprintf(stderr, "%s at %lld: expected %lld bytes, got %lld\n", op, off, len, got);
        exit(1);
    }
    printf("%s %lld %lld\n", op, off, len);
}

int main(int argc, char **argv)
{
    if (argc != 2)
        return 2;
    int fd = open(argv[1], O_RDWR | O_CREAT | O_TRUNC, 0644);
    if (fd < 0)
        return 1;
    for (int i = 0; i < 64; i++)
        did("write", i * 2048LL, 512, pwrite(fd, buf, 512, i * 2048));
    /* size is now 63 * 2048 + 512 = 129536 */
    for (int i = 0; i < 64; i++)
        did("read", 100 + i * 1536LL, 256, pread(fd, buf, 256, 100 + i * 1536));
    lseek(fd, 0, SEEK_SET);
    for (int i = 0; i < 4; i++)
        did("read", i * 1000LL, 1000, read(fd, buf, 1000));
    lseek(fd, 8192, SEEK_SET);
    for (int i = 0; i < 3; i++)
        did("write", 8192 + i * 300LL, 300, write(fd, buf, 300));
    lseek(fd, -100, SEEK_CUR); /* 8992 */
    did("read", 8992, 50, read(fd, buf, 50));
    struct iovec iov[2] = {{buf, 100}, {buf + 100, 100}};
    did("read", 9042, 200, readv(fd, iov, 2));
    int fd2 = dup(fd); /* shares the position */
    did("read", 9242, 10, read(fd2, buf, 10));
    did("read", 9252, 10, read(fd, buf, 10));
    did("read", 0, 64, pread(fd, buf, 64, 0)); /* does not move it */
    did("read", 9262, 5, read(fd2, buf, 5));
    int fa = open(argv[1], O_WRONLY | O_APPEND);
    did("write", 129536, 77, write(fa, buf, 77));
    did("write", 129613, 23, write(fa, buf, 23));
    lseek(fd, 0, SEEK_END);
    did("read", 129636, 0, read(fd, buf, 100)); /* end of file: recorded, length 0 */
    if (pread(fd, buf, 10, -5) != -1) /* fails: not recorded */
        return 1;
    struct iovec wv[2] = {{buf, 64}, {buf, 64}};
    did("write", 40000, 128, pwritev(fd, wv, 2, 40000));
    close(fa);
    close(fd2);
    close(fd);
    return 0;
}
