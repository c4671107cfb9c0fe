/*
 * reorg_capi.c — the C ABI of reorganized files (patio_reorg.h) from C.
 *
 * Usage: reorg_capi SOURCE PLAIN. SOURCE has a registered, current container; PLAIN has
 * none. Checks: open results; extents (random, some past the end of the file) read
 * through the container equal pread of SOURCE, cut at its end; statistics; four
 * threads reading one handle at once; patio_reorg_check; null arguments and messages
 * truncated to the buffer. Prints "ok" or the first failure (exit 1).
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "patio_reorg.h"

#define CHECK(cond, ...)                                                                   \
    do {                                                                                   \
        if (!(cond)) {                                                                     \
            fprintf(stderr, "line %d: ", __LINE__);                                        \
            fprintf(stderr, __VA_ARGS__);                                                  \
            fprintf(stderr, "\n");                                                         \
            exit(1);                                                                       \
        }                                                                                  \
    } while (0)

static int source_fd;
static uint64_t source_size;
static PatioReorgFile *handle;

static uint64_t next(uint64_t *x)
{
    *x = *x * 6364136223846793005ull + 1442695040888963407ull;
    return *x >> 17;
}

/* Reads n random extents through the handle and compares them with pread of SOURCE. */
static void compare(uint64_t seed, int rounds)
{
    enum { N = 6, MAXLEN = 20000 };
    static _Thread_local unsigned char got[N * MAXLEN], want[N * MAXLEN];
    uint64_t x = seed;
    for (int r = 0; r < rounds; r++) {
        uint64_t ext[2 * N];
        size_t expect = 0;
        for (int i = 0; i < N; i++) {
            ext[2 * i] = next(&x) % (source_size + 5000);
            ext[2 * i + 1] = next(&x) % MAXLEN;
            uint64_t o = ext[2 * i], l = ext[2 * i + 1];
            if (o < source_size) {
                uint64_t n = l < source_size - o ? l : source_size - o;
                CHECK(pread(source_fd, want + expect, n, (off_t)o) == (ssize_t)n, "pread");
                expect += n;
            }
        }
        uint64_t bytes = 0;
        char msg[256];
        int rc = patio_reorg_read(handle, ext, N, got, &bytes, msg, sizeof msg);
        CHECK(rc == 0, "patio_reorg_read: %s", msg);
        CHECK(bytes == expect, "read %llu bytes, expected %zu", (unsigned long long)bytes,
              expect);
        CHECK(memcmp(got, want, expect) == 0, "bytes differ from the source");
    }
}

static void *reader(void *arg)
{
    compare((uint64_t)(uintptr_t)arg, 50);
    return NULL;
}

int main(int argc, char **argv)
{
    CHECK(argc == 3, "usage: reorg_capi SOURCE PLAIN");
    CHECK(patio_reorg_abi_version() == PATIO_REORG_ABI_VERSION, "ABI version");
    char msg[512];
    PatioReorgFile *none = NULL;
    CHECK(patio_reorg_open(argv[2], &none, msg, sizeof msg) == PATIO_REORG_NOT_REGISTERED &&
              none == NULL,
          "a plain file is not registered");
    CHECK(patio_reorg_open(NULL, &none, msg, sizeof msg) == PATIO_REORG_ERROR, "null source");
    char tiny[6];
    CHECK(patio_reorg_open(NULL, &none, tiny, sizeof tiny) == PATIO_REORG_ERROR &&
              strlen(tiny) == 5,
          "message truncated to the buffer");

    int rc = patio_reorg_open(argv[1], &handle, msg, sizeof msg);
    CHECK(rc == PATIO_REORG_SERVED, "open %s: %d %s", argv[1], rc, msg);
    source_fd = open(argv[1], O_RDONLY);
    CHECK(source_fd >= 0, "open source");
    source_size = (uint64_t)lseek(source_fd, 0, SEEK_END);
    CHECK(patio_reorg_size(handle) == source_size, "size");
    CHECK(patio_reorg_container(handle) && strlen(patio_reorg_container(handle)) > 0,
          "container");
    CHECK(patio_reorg_check(handle, msg, sizeof msg) == 0, "check: %s", msg);

    compare(1, 100);
    PatioReorgStats s;
    patio_reorg_stats(handle, &s);
    CHECK(s.calls == 100 && s.bytes > 0 && s.physical_reads > 0, "stats %llu %llu %llu",
          (unsigned long long)s.calls, (unsigned long long)s.bytes,
          (unsigned long long)s.physical_reads);

    pthread_t t[4];
    for (uintptr_t i = 0; i < 4; i++)
        CHECK(pthread_create(&t[i], NULL, reader, (void *)(i + 2)) == 0, "thread");
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
    patio_reorg_stats(handle, &s);
    CHECK(s.calls == 300, "calls after the threads: %llu", (unsigned long long)s.calls);

    uint64_t past[2] = {source_size + 10, 100}, bytes = 1;
    unsigned char one;
    CHECK(patio_reorg_read(handle, past, 1, &one, &bytes, msg, sizeof msg) == 0 && bytes == 0,
          "an extent past the end reads nothing");
    CHECK(patio_reorg_read(NULL, past, 1, &one, &bytes, msg, sizeof msg) == -1, "null handle");
    patio_reorg_close(handle);
    patio_reorg_close(NULL);
    close(source_fd);
    printf("ok\n");
    return 0;
}
