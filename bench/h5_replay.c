/* h5_replay.c - an unmodified HDF5 program for patio's VOL benchmarks and tests: reads
 * one dataset with the selections listed in a script, each into a dense buffer of the
 * dataset's native type, the way analysis codes issue H5Dread. It knows nothing of
 * patio; loaded with patio's connector (patio run --hdf5, or patio layout vol-env) its
 * reads are recorded and served from replicas.
 *
 *   h5_replay FILE DATASET SCRIPT
 *
 * SCRIPT is text, one read after another:
 *   slabs RANK N      then N lines of 4*RANK integers (start, stride, count, block),
 *                     selected together (a union of hyperslabs)
 *   points RANK N     then N lines of RANK coordinates (in buffer order)
 * Prints one JSON line: {"reads", "bytes", "seconds" (from H5Fopen to H5Fclose),
 * "fnv1a" (64-bit FNV-1a of every element read, in order, as a hex string)}.
 * Exit status 1 with one line on a bad script or any HDF5 failure.
 */
#include <hdf5.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_RANK 32

static void die(const char *what, long line)
{
    if (line > 0)
        fprintf(stderr, "h5_replay: script line %ld: %s\n", line, what);
    else
        fprintf(stderr, "h5_replay: %s failed\n", what);
    exit(1);
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static hsize_t number(FILE *s, long line)
{
    unsigned long long v;
    if (fscanf(s, "%llu", &v) != 1)
        die("expected a non-negative integer", line);
    return (hsize_t)v;
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: h5_replay FILE DATASET SCRIPT\n");
        return 2;
    }
    FILE *script = fopen(argv[3], "r");
    if (!script) {
        perror(argv[3]);
        return 1;
    }
    if (H5open() < 0)
        die("H5open", 0);
    double t0 = now();
    hid_t file = H5Fopen(argv[1], H5F_ACC_RDONLY, H5P_DEFAULT);
    if (file < 0)
        die("H5Fopen", 0);
    hid_t dset = H5Dopen2(file, argv[2], H5P_DEFAULT);
    if (dset < 0)
        die("H5Dopen2", 0);
    hid_t ftype = H5Dget_type(dset);
    hid_t mtype = ftype >= 0 ? H5Tget_native_type(ftype, H5T_DIR_ASCEND) : -1;
    size_t item = mtype >= 0 ? H5Tget_size(mtype) : 0;
    if (!item)
        die("H5Tget_native_type", 0);
    hid_t fs = H5Dget_space(dset);
    int drank = fs >= 0 ? H5Sget_simple_extent_ndims(fs) : -1;
    if (drank <= 0 || drank > MAX_RANK)
        die("H5Dget_space", 0);
    uint64_t hash = 1469598103934665603ULL, bytes = 0;
    long reads = 0, line = 0;
    char word[16];
    while (fscanf(script, "%15s", word) == 1) {
        line++;
        int points = !strcmp(word, "points");
        if (!points && strcmp(word, "slabs"))
            die("expected 'slabs' or 'points'", line);
        hsize_t rank = number(script, line), n = number(script, line);
        if ((int)rank != drank || n == 0)
            die("rank differs from the dataset's, or nothing selected", line);
        if (points) {
            hsize_t *c = malloc(n * rank * sizeof *c);
            if (!c)
                die("malloc", 0);
            for (hsize_t i = 0; i < n * rank; i++)
                c[i] = number(script, line);
            if (H5Sselect_elements(fs, H5S_SELECT_SET, n, c) < 0)
                die("H5Sselect_elements", 0);
            free(c);
        } else {
            for (hsize_t k = 0; k < n; k++) {
                hsize_t v[4 * MAX_RANK];
                for (hsize_t i = 0; i < 4 * rank; i++)
                    v[i] = number(script, line);
                if (H5Sselect_hyperslab(fs, k ? H5S_SELECT_OR : H5S_SELECT_SET, v, v + rank,
                                        v + 2 * rank, v + 3 * rank) < 0)
                    die("H5Sselect_hyperslab", 0);
            }
        }
        hssize_t npts = H5Sget_select_npoints(fs);
        hsize_t m = (hsize_t)npts;
        hid_t ms = npts > 0 ? H5Screate_simple(1, &m, NULL) : -1;
        unsigned char *buf = ms >= 0 ? malloc(m * item) : NULL;
        if (!buf)
            die("H5Screate_simple", 0);
        if (H5Dread(dset, mtype, ms, fs, H5P_DEFAULT, buf) < 0)
            die("H5Dread", 0);
        for (size_t i = 0; i < m * item; i++)
            hash = (hash ^ buf[i]) * 1099511628211ULL;
        bytes += m * item;
        reads++;
        free(buf);
        H5Sclose(ms);
    }
    H5Sclose(fs);
    H5Tclose(mtype);
    H5Tclose(ftype);
    if (H5Dclose(dset) < 0 || H5Fclose(file) < 0)
        die("H5Fclose", 0);
    double seconds = now() - t0;
    printf("{\"reads\": %ld, \"bytes\": %llu, \"seconds\": %.6f, \"fnv1a\": \"%016llx\"}\n",
           reads, (unsigned long long)bytes, seconds, (unsigned long long)hash);
    fclose(script);
    return 0;
}
