/* Return values and errno of failing and succeeding calls, printed one per line; the
 * output must be the same with and without the tracer. errno is set to a marker
 * before successful calls: they must leave it alone. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#define SHOW(name, expr)                                                   \
    do {                                                                   \
        errno = 777;                                                       \
        long long r_ = (long long)(expr);                                  \
        printf("%-28s ret=%lld errno=%d\n", name, r_, errno);              \
    } while (0)

int main(int argc, char **argv)
{
    char buf[64];
    if (argc != 2)
        return 2;
    SHOW("open missing", open("/nonexistent/patio", O_RDONLY));
    SHOW("openat missing", openat(AT_FDCWD, "/nonexistent/patio", O_RDONLY));
    SHOW("fopen missing", fopen("/nonexistent/patio", "r") == NULL);
    SHOW("read bad fd", read(-1, buf, 1));
    SHOW("read closed fd", read(1000, buf, 1));
    SHOW("write bad fd", write(-1, buf, 1));
    SHOW("close bad fd", close(1000));
    SHOW("dup bad fd", dup(1000));
    SHOW("dup2 bad fd", dup2(1000, 900));
    int fd = open(argv[1], O_RDWR | O_CREAT | O_TRUNC, 0644);
    printf("open ok errno=%d\n", fd >= 0 ? errno : -1);
    SHOW("write ok", write(fd, "0123456789", 10));
    SHOW("pwrite ok", pwrite(fd, "ab", 2, 20));
    SHOW("lseek ok", lseek(fd, 0, SEEK_SET));
    SHOW("read ok", read(fd, buf, 5));
    SHOW("pread ok", pread(fd, buf, 5, 2));
    struct iovec iov = {buf, 4};
    SHOW("readv ok", readv(fd, &iov, 1));
    SHOW("preadv ok", preadv(fd, &iov, 1, 3));
    SHOW("pread negative", pread(fd, buf, 5, -1));
    SHOW("lseek negative", lseek(fd, -10, SEEK_SET));
    SHOW("read directory", read(open("/", O_RDONLY), buf, 5));
    SHOW("write read-only", write(open(argv[1], O_RDONLY), buf, 5));
    SHOW("fcntl getfl", fcntl(fd, F_GETFL) & O_ACCMODE);
    SHOW("fcntl dupfd", fcntl(fd, F_DUPFD, 50));
    SHOW("fcntl bad", fcntl(1000, F_GETFL));
    SHOW("dup ok", dup(fd) > 0);
    SHOW("close ok", close(fd));
    SHOW("close again", close(fd));
    FILE *fp = NULL;
    SHOW("fopen ok", (fp = fopen(argv[1], "r")) != NULL);
    SHOW("fread ok", fread(buf, 1, 8, fp));
    SHOW("fread at end", fread(buf, 1, 64, fp));
    SHOW("fclose ok", fclose(fp));
    FILE *mem = fmemopen(buf, sizeof buf, "r");
    SHOW("fread memory stream", fread(buf, 1, 4, mem));
    SHOW("fwrite read-only stream", fwrite(buf, 1, 4, mem));
    fclose(mem);
    struct sigaction sa;
    SHOW("sigaction SIGTERM", sigaction(SIGTERM, NULL, &sa));
    printf("SIGTERM default=%d flags=%d\n", sa.sa_handler == SIG_DFL, sa.sa_flags);
    SHOW("sigaction SIGSEGV", sigaction(SIGSEGV, NULL, &sa));
    printf("SIGSEGV default=%d\n", sa.sa_handler == SIG_DFL);
    SHOW("signal SIGINT", signal(SIGINT, SIG_IGN) == SIG_DFL);
    SHOW("signal SIGINT back", signal(SIGINT, SIG_DFL) == SIG_IGN);
    SHOW("signal SIGINT again", signal(SIGINT, SIG_DFL) == SIG_DFL);
    return 0;
}
