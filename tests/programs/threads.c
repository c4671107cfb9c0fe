/* Two threads pread the same descriptor: thread t reads 4 KiB blocks 2i + t, i < N.
 * Prints "thread T TID" for each thread so the test can match records to threads. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

static int fd, n;
static pid_t tids[2];

static void *reader(void *arg)
{
    long t = (long)arg;
    char buf[4096];
    tids[t] = (pid_t)syscall(SYS_gettid);
    for (int i = 0; i < n; i++)
        if (pread(fd, buf, sizeof buf, (2LL * i + t) * 4096) != (ssize_t)sizeof buf)
            exit(1);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 3)
        return 2;
    n = atoi(argv[2]);
    if ((fd = open(argv[1], O_RDONLY)) < 0)
        return 1;
    pthread_t th[2];
    for (long t = 0; t < 2; t++)
        pthread_create(&th[t], NULL, reader, (void *)t);
    for (int t = 0; t < 2; t++)
        pthread_join(th[t], NULL);
    for (int t = 0; t < 2; t++)
        printf("thread %d %d\n", t, (int)tids[t]);
    return close(fd);
}
