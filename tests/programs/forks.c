/* fork with a shared descriptor: parent writes 0 and 100, the child writes 200, 300
 * (the position is shared with the parent) and pwrites at 5000, then ends with _exit;
 * the parent waits and writes at 400, then runs `exec` of argv[2..] when given.
 * Prints "parent PID" and "child PID". */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    char buf[100] = {0};
    if (argc < 2)
        return 2;
    int fd = open(argv[1], O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || write(fd, buf, 100) != 100 || write(fd, buf, 100) != 100)
        return 1;
    printf("parent %d\n", (int)getpid());
    fflush(stdout);
    pid_t child = fork();
    if (child == 0) {
        printf("child %d\n", (int)getpid());
        fflush(stdout);
        if (write(fd, buf, 100) != 100 || write(fd, buf, 100) != 100 ||
            pwrite(fd, buf, 50, 5000) != 50)
            _exit(1);
        _exit(0);
    }
    int status;
    if (waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status))
        return 1;
    if (write(fd, buf, 100) != 100)
        return 1;
    close(fd);
    if (argc > 2) {
        execv(argv[2], argv + 2);
        return 1;
    }
    return 0;
}
