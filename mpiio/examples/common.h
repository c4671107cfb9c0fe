/*
 * common.h — shared pieces of the MPI-IO example programs (tile_reader, ior_reader,
 * overhead): option parsing, the FNV-1a checksum, per-rank dumps and the report every
 * program prints (one line per rank, in rank order).
 */
#ifndef PATIO_MPIIO_EXAMPLES_H
#define PATIO_MPIIO_EXAMPLES_H

#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static inline void die(const char *fmt, const char *what)
{
    fprintf(stderr, "%s: ", "error");
    fprintf(stderr, fmt, what);
    fputc('\n', stderr);
    MPI_Abort(MPI_COMM_WORLD, 2);
    exit(2);
}

/* MPI_Init, this rank and the number of ranks; a usage error without FILE. */
static inline void start(int *argc, char ***argv, const char *usage, int *rank, int *size)
{
    MPI_Init(argc, argv);
    MPI_Comm_rank(MPI_COMM_WORLD, rank);
    MPI_Comm_size(MPI_COMM_WORLD, size);
    if (*argc < 2 || (*argv)[1][0] == '-')
        die("usage: %s", usage);
}

static inline MPI_File open_or_die(MPI_Comm comm, const char *path, int amode)
{
    MPI_File fh;
    if (MPI_File_open(comm, path, amode, MPI_INFO_NULL, &fh) != MPI_SUCCESS)
        die("cannot open %s", path);
    return fh;
}

/* The value of option `name` (--name VALUE) or `dflt`. */
static inline const char *opt(int argc, char **argv, const char *name, const char *dflt)
{
    for (int i = 2; i + 1 < argc; i++)
        if (strcmp(argv[i], name) == 0)
            return argv[i + 1];
    return dflt;
}

static inline long long opt_ll(int argc, char **argv, const char *name, long long dflt)
{
    const char *v = opt(argc, argv, name, NULL);
    if (!v)
        return dflt;
    char *end;
    long long n = strtoll(v, &end, 10);
    if (*end || n < 0)
        die("bad value for %s", name);
    return n;
}

static inline uint64_t fnv(const unsigned char *p, size_t n, uint64_t h)
{
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 1099511628211ull;
    return h;
}
#define FNV_START 1469598103934665603ull

/* Checks a status: the read must have moved `want` bytes of `dt`-typed data. */
static inline void expect_count(MPI_Status *st, MPI_Datatype dt, int want, const char *what)
{
    int got;
    MPI_Get_count(st, dt, &got);
    if (got != want) {
        fprintf(stderr, "error: %s: MPI_Get_count %d, expected %d\n", what, got, want);
        MPI_Abort(MPI_COMM_WORLD, 3);
    }
}

/* Appends `n` bytes to the rank's dump (DIR/rank<r>.bin) when --dump DIR was given,
 * and to the rank's checksum. */
typedef struct {
    FILE *dump;
    uint64_t sum, bytes;
} report_t;

static inline void report_open(report_t *r, int argc, char **argv, int rank)
{
    memset(r, 0, sizeof *r);
    r->sum = FNV_START;
    const char *dir = opt(argc, argv, "--dump", NULL);
    if (dir) {
        char path[4096];
        snprintf(path, sizeof path, "%s/rank%d.bin", dir, rank);
        if (!(r->dump = fopen(path, "wb")))
            die("cannot write %s", path);
    }
}

static inline void report_add(report_t *r, const void *p, size_t n)
{
    r->sum = fnv(p, n, r->sum);
    r->bytes += n;
    if (r->dump && fwrite(p, 1, n, r->dump) != n)
        die("%s", "cannot write the dump");
}

/* Rank 0 prints "rank R bytes N fnv HEX" for every rank, in order. */
static inline void report_close(report_t *r, int rank, int size)
{
    if (r->dump)
        fclose(r->dump);
    unsigned long long mine[2] = {r->bytes, r->sum}, *all = NULL;
    if (rank == 0)
        all = malloc(sizeof mine * (size_t)size);
    MPI_Gather(mine, 2, MPI_UNSIGNED_LONG_LONG, all, 2, MPI_UNSIGNED_LONG_LONG, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        for (int i = 0; i < size; i++)
            printf("rank %d bytes %llu fnv %016llx\n", i, all[2 * i], all[2 * i + 1]);
        free(all);
    }
}

#endif
