/* dup2 over traced descriptors: reads B at 0; dup2(A, B); reads through B at A's
 * position (0), through A (10), closes A, reads through B (20); dup2(C, 1) and writes
 * "hello\n" through descriptor 1 at C's 0. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    char buf[10];
    if (argc != 4)
        return 2;
    int a = open(argv[1], O_RDONLY), b = open(argv[2], O_RDONLY);
    int c = open(argv[3], O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (a < 0 || b < 0 || c < 0 || read(b, buf, 10) != 10)
        return 1;
    if (dup2(a, b) != b || read(b, buf, 10) != 10 || read(a, buf, 10) != 10)
        return 1;
    close(a);
    if (read(b, buf, 10) != 10)
        return 1;
    if (dup2(c, 1) != 1 || write(1, "hello\n", 6) != 6)
        return 1;
    return 0;
}
