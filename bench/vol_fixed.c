/* vol_fixed.c - bench/vol_fixed.py's reader: what one open, one read and one close of a
 * file cost, through whatever connector HDF5_VOL_CONNECTOR names (or the native one).
 *
 *   vol_fixed FILE DATASET ITERATIONS START0 START1 COUNT0 COUNT1
 *
 * Each iteration opens FILE, opens DATASET (2-D, read as doubles), reads the hyperslab
 * START x COUNT into a dense buffer, closes the dataset and the file, each step timed
 * with clock_gettime(CLOCK_MONOTONIC). Output: one line per iteration,
 *
 *   iter <open_ns> <dopen_ns> <read_ns> <dclose_ns> <close_ns> <checksum>
 *
 * (checksum: FNV-1a of the bytes read, the same through every connector), then
 * "init <ns>" - the time from the program's start to the end of its first H5Fopen,
 * which includes loading HDF5 and the connector. Exit status 1 with one line on any HDF5
 * failure.
 */
#include <hdf5.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static void die(const char *what)
{
    fprintf(stderr, "vol_fixed: %s failed\n", what);
    exit(1);
}

int main(int argc, char **argv)
{
    double born = now_ns();
    if (argc != 8) {
        fprintf(stderr, "usage: vol_fixed FILE DATASET ITERATIONS START0 START1 COUNT0 COUNT1\n");
        return 2;
    }
    long iterations = strtol(argv[3], NULL, 10);
    hsize_t start[2] = {strtoull(argv[4], NULL, 10), strtoull(argv[5], NULL, 10)};
    hsize_t count[2] = {strtoull(argv[6], NULL, 10), strtoull(argv[7], NULL, 10)};
    if (iterations < 1 || count[0] < 1 || count[1] < 1) {
        fprintf(stderr, "vol_fixed: ITERATIONS and COUNT must be positive\n");
        return 2;
    }
    double *buf = malloc(count[0] * count[1] * sizeof *buf);
    if (!buf)
        die("malloc");
    double first_open = 0;
    for (long i = 0; i < iterations; i++) {
        double t0 = now_ns();
        hid_t file = H5Fopen(argv[1], H5F_ACC_RDONLY, H5P_DEFAULT);
        if (file < 0)
            die("H5Fopen");
        double t1 = now_ns();
        if (i == 0)
            first_open = t1;
        hid_t dset = H5Dopen2(file, argv[2], H5P_DEFAULT);
        if (dset < 0)
            die("H5Dopen2");
        double t2 = now_ns();
        hid_t fs = H5Dget_space(dset), ms = H5Screate_simple(2, count, NULL);
        if (fs < 0 || ms < 0 ||
            H5Sselect_hyperslab(fs, H5S_SELECT_SET, start, NULL, count, NULL) < 0)
            die("selecting");
        double t3 = now_ns();
        if (H5Dread(dset, H5T_NATIVE_DOUBLE, ms, fs, H5P_DEFAULT, buf) < 0)
            die("H5Dread");
        double t4 = now_ns();
        H5Sclose(fs);
        H5Sclose(ms);
        double t5 = now_ns();
        if (H5Dclose(dset) < 0)
            die("H5Dclose");
        double t6 = now_ns();
        if (H5Fclose(file) < 0)
            die("H5Fclose");
        double t7 = now_ns();
        uint64_t h = 1469598103934665603ULL;
        const unsigned char *b = (const unsigned char *)buf;
        for (size_t k = 0; k < count[0] * count[1] * sizeof *buf; k++)
            h = (h ^ b[k]) * 1099511628211ULL;
        printf("iter %.0f %.0f %.0f %.0f %.0f %016llx\n", t1 - t0, t2 - t1, t4 - t3, t6 - t5,
               t7 - t6, (unsigned long long)h);
    }
    printf("init %.0f\n", first_open - born);
    free(buf);
    return 0;
}
