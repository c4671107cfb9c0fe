/* Reads N 1 KiB blocks of a file, then dies by the signal named in argv[3]
 * (abort, segv, term): the records must survive. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    char buf[1024];
    if (argc != 4)
        return 2;
    int fd = open(argv[1], O_RDONLY), n = atoi(argv[2]);
    for (int i = 0; i < n; i++)
        if (read(fd, buf, sizeof buf) != (ssize_t)sizeof buf)
            return 1;
    if (strcmp(argv[3], "abort") == 0)
        abort();
    if (strcmp(argv[3], "segv") == 0)
        *(volatile int *)0 = 1;
    raise(SIGTERM);
    return 3;
}
