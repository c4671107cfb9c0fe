/* Compute-plus-I/O loop for bench/tracer_overhead.py.
 *
 *   compute_io --calibrate US         prints the spin count that computes for about US µs
 *   compute_io FILE ITERATIONS SPINS  ITERATIONS times: compute SPINS spins, then pread
 *                                     4 KiB from FILE (cycling through it); prints the
 *                                     loop's wall and CPU nanoseconds and the preads
 *
 * The work per iteration is a fixed spin count (not a wait on the clock), so the same
 * work is done with and without the tracer and CPU time measures it on a busy machine. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static volatile unsigned long sink;

static long long ns(clockid_t clock)
{
    struct timespec ts;
    clock_gettime(clock, &ts);
    return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void compute(long spins)
{
    unsigned long x = sink;
    for (long k = 0; k < spins; k++)
        x = x * 6364136223846793005ul + 1442695040888963407ul;
    sink = x;
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--calibrate") == 0) {
        long spins = 1000000;
        long long best = -1;
        for (int round = 0; round < 7; round++) {
            long long t0 = ns(CLOCK_THREAD_CPUTIME_ID);
            compute(spins);
            long long t = ns(CLOCK_THREAD_CPUTIME_ID) - t0;
            if (best < 0 || t < best)
                best = t;
        }
        printf("%ld\n", (long)((double)spins * atof(argv[2]) * 1000.0 / (double)best));
        return 0;
    }
    if (argc != 4) {
        fprintf(stderr, "usage: %s FILE ITERATIONS SPINS | --calibrate US\n", argv[0]);
        return 2;
    }
    int fd = open(argv[1], O_RDONLY);
    long iterations = atol(argv[2]), spins = atol(argv[3]);
    off_t size = fd < 0 ? 0 : lseek(fd, 0, SEEK_END);
    if (size < 4096)
        return 1;
    size -= size % 4096;
    char buf[4096];
    long long wall = ns(CLOCK_MONOTONIC), cpu = ns(CLOCK_PROCESS_CPUTIME_ID);
    for (long i = 0; i < iterations; i++) {
        compute(spins);
        if (pread(fd, buf, sizeof buf, (i * 4096) % size) != sizeof buf)
            return 1;
    }
    printf("%lld %lld %ld\n", ns(CLOCK_MONOTONIC) - wall, ns(CLOCK_PROCESS_CPUTIME_ID) - cpu,
           iterations);
    return close(fd);
}
