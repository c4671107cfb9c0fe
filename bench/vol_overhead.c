/* vol_overhead.c - bench/vol_overhead.py's reader: the time of each H5Dread of a set of
 * selections, through the native connector and through patio's VOL connector, in one
 * process, interleaved.
 *
 *   vol_overhead [--all-native] NATIVE PASS RECORD DATASET ROUNDS TARGET_US [CASE]
 *
 * NATIVE, PASS and RECORD are copies of one file. NATIVE is opened with the native
 * connector; PASS and RECORD with patio's connector ("patio under_vol=0;under_info={}",
 * found through HDF5_PLUGIN_PATH, set on the file access list: the same connector
 * objects HDF5_VOL_CONNECTOR makes); RECORD has a knowledge base, PASS has none. DATASET
 * is a 2-D dataset of doubles of at least 2048 x 2048.
 *
 * Per case (the selections below), ROUNDS rounds; in each round the three files are read
 * in turn, the order rotated every round, each a batch of reads sized so that a batch
 * takes about TARGET_US µs (from a warm-up of the native file); every H5Dread is timed
 * alone with clock_gettime(CLOCK_MONOTONIC). Output, one line per case and connector:
 *
 *   case <name> <config> <elements> <reads> <median_ns> <p90_ns> <mean_ns> <round medians,>
 *
 * CASE, if given, runs that case alone (for profiling). --all-native opens all three
 * files with the native connector: the control, what three copies of a file differ by.
 * Exit status 1 with one line on any HDF5 failure.
 */
#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CONFIGS 3
#define POINTS 64
#define MAX_BATCH 5000

static const char *const config_name[CONFIGS] = {"native", "pass", "record"};

struct sel {
    const char *name;
    int points;                          /* 0: a hyperslab */
    hsize_t start[2], stride[2], count[2]; /* the hyperslab */
};

/* Rows of 2048 doubles: 8 elements, 4 KiB, 64 KiB (4 rows), 1 MiB (64 rows), every
 * 8th element of every 8th row of a 512 x 512 corner (32 KiB) and 64 scattered points. */
static const struct sel cases[] = {
    {"8-elements", 0, {1000, 1000}, {1, 1}, {1, 8}},
    {"4KiB", 0, {1000, 512}, {1, 1}, {1, 512}},
    {"64KiB", 0, {1000, 0}, {1, 1}, {4, 2048}},
    {"1MiB", 0, {960, 0}, {1, 1}, {64, 2048}},
    {"strided-32KiB", 0, {0, 0}, {8, 8}, {64, 64}},
    {"points-64", 1, {0, 0}, {1, 1}, {0, 0}},
};

static void die(const char *what)
{
    fprintf(stderr, "vol_overhead: %s failed\n", what);
    exit(1);
}

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The q-quantile of n sorted values (nearest rank). */
static double quantile(const double *sorted, size_t n, double q)
{
    size_t i = (size_t)(q * (double)(n - 1) + 0.5);
    return sorted[i < n ? i : n - 1];
}

static hid_t open_file(const char *path, hid_t vol)
{
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    if (fapl < 0)
        die("H5Pcreate");
    if (vol >= 0) {
        void *info = NULL;
        if (H5VLconnector_str_to_info("under_vol=0;under_info={}", vol, &info) < 0)
            die("H5VLconnector_str_to_info");
        if (H5Pset_vol(fapl, vol, info) < 0)
            die("H5Pset_vol");
        H5VLfree_connector_info(vol, info);
    }
    hid_t file = H5Fopen(path, H5F_ACC_RDONLY, fapl);
    if (file < 0)
        die("H5Fopen");
    H5Pclose(fapl);
    return file;
}

/* The file and memory spaces of a case, and its number of elements. */
static hsize_t select_case(hid_t dset, const struct sel *c, hid_t *fs, hid_t *ms)
{
    *fs = H5Dget_space(dset);
    if (*fs < 0)
        die("H5Dget_space");
    hsize_t n;
    if (c->points) {
        hsize_t coord[POINTS][2];
        unsigned long long x = 88172645463325252ULL; /* xorshift: fixed scattered points */
        for (int i = 0; i < POINTS; i++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            coord[i][0] = (hsize_t)(i * 32 + (int)(x % 32)); /* ascending rows */
            coord[i][1] = (hsize_t)((x >> 8) % 2048);
        }
        if (H5Sselect_elements(*fs, H5S_SELECT_SET, POINTS, &coord[0][0]) < 0)
            die("H5Sselect_elements");
        n = POINTS;
        *ms = H5Screate_simple(1, &n, NULL);
    } else {
        if (H5Sselect_hyperslab(*fs, H5S_SELECT_SET, c->start, c->stride, c->count, NULL) < 0)
            die("H5Sselect_hyperslab");
        n = c->count[0] * c->count[1];
        *ms = H5Screate_simple(2, c->count, NULL);
    }
    if (*ms < 0)
        die("H5Screate_simple");
    return n;
}

/* Reads the case `reads` times, each timed alone, into t. */
static void batch(hid_t dset, hid_t ms, hid_t fs, double *buf, double *t, size_t reads)
{
    for (size_t i = 0; i < reads; i++) {
        double start = now_ns();
        if (H5Dread(dset, H5T_NATIVE_DOUBLE, ms, fs, H5P_DEFAULT, buf) < 0)
            die("H5Dread");
        t[i] = now_ns() - start;
    }
}

int main(int argc, char **argv)
{
    int all_native = argc > 1 && !strcmp(argv[1], "--all-native");
    argc -= all_native;
    argv += all_native;
    if (argc != 7 && argc != 8) {
        fprintf(stderr, "usage: vol_overhead [--all-native] NATIVE PASS RECORD DATASET ROUNDS "
                        "TARGET_US [CASE]\n");
        return 2;
    }
    size_t rounds = strtoul(argv[5], NULL, 10);
    double target_ns = strtod(argv[6], NULL) * 1e3;
    if (rounds < 1 || target_ns <= 0) {
        fprintf(stderr, "vol_overhead: ROUNDS and TARGET_US must be positive\n");
        return 2;
    }
    hid_t patio = H5VLregister_connector_by_name("patio", H5P_DEFAULT);
    if (patio < 0)
        die("H5VLregister_connector_by_name(patio)");
    hid_t file[CONFIGS], dset[CONFIGS];
    for (int k = 0; k < CONFIGS; k++) {
        file[k] = open_file(argv[1 + k], k && !all_native ? patio : -1);
        if ((dset[k] = H5Dopen2(file[k], argv[4], H5P_DEFAULT)) < 0)
            die("H5Dopen2");
    }
    double *buf = malloc((size_t)2048 * 2048 * sizeof *buf);
    double *t[CONFIGS], *medians[CONFIGS];
    for (int k = 0; k < CONFIGS; k++) {
        t[k] = malloc(rounds * MAX_BATCH * sizeof *t[k]);
        medians[k] = malloc(rounds * sizeof *medians[k]);
        if (!t[k] || !medians[k])
            die("malloc");
    }
    if (!buf)
        die("malloc");

    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        if (argc == 8 && strcmp(argv[7], cases[c].name))
            continue;
        hid_t fs[CONFIGS], ms[CONFIGS];
        hsize_t n = 0;
        for (int k = 0; k < CONFIGS; k++)
            n = select_case(dset[k], &cases[c], &fs[k], &ms[k]);
        for (int k = 0; k < CONFIGS; k++) /* warm-up: caches filled, a batch sized */
            batch(dset[k], ms[k], fs[k], buf, t[k], 20);
        qsort(t[0], 20, sizeof *t[0], by_value);
        size_t reads = (size_t)(target_ns / (t[0][10] > 1 ? t[0][10] : 1));
        reads = reads < 5 ? 5 : reads > MAX_BATCH ? MAX_BATCH : reads;
        for (size_t r = 0; r < rounds; r++) {
            for (int j = 0; j < CONFIGS; j++) {
                int k = (int)((j + r) % CONFIGS);
                double *mine = t[k] + r * reads;
                batch(dset[k], ms[k], fs[k], buf, mine, reads);
                double *sorted = malloc(reads * sizeof *sorted);
                if (!sorted)
                    die("malloc");
                memcpy(sorted, mine, reads * sizeof *sorted);
                qsort(sorted, reads, sizeof *sorted, by_value);
                medians[k][r] = quantile(sorted, reads, 0.5);
                free(sorted);
            }
        }
        for (int k = 0; k < CONFIGS; k++) {
            size_t all = rounds * reads;
            double sum = 0;
            for (size_t i = 0; i < all; i++)
                sum += t[k][i];
            qsort(t[k], all, sizeof *t[k], by_value);
            printf("case %s %s %llu %zu %.1f %.1f %.1f ", cases[c].name, config_name[k],
                   (unsigned long long)n, all, quantile(t[k], all, 0.5), quantile(t[k], all, 0.9),
                   sum / (double)all);
            for (size_t r = 0; r < rounds; r++)
                printf("%s%.1f", r ? "," : "", medians[k][r]);
            printf("\n");
            H5Sclose(fs[k]);
            H5Sclose(ms[k]);
        }
        fflush(stdout);
    }

    for (int k = 0; k < CONFIGS; k++) {
        H5Dclose(dset[k]);
        if (H5Fclose(file[k]) < 0)
            die("H5Fclose");
        free(t[k]);
        free(medians[k]);
    }
    free(buf);
    H5VLunregister_connector(patio);
    return 0;
}
