/* vol_read.c - an unmodified HDF5 program for the VOL connector's tests: reads a 3-D
 * dataset with the selections analysis codes use, each as doubles appended to OUT.
 *
 *   vol_read FILE DATASET OUT [--no-memsel] [--twice]
 *
 * Reads, in order (d0 x d1 x d2 the dataset's shape, d0 >= 4, d1 >= 8, d2 >= 4):
 *   1. everything (H5S_ALL)
 *   2. a box: [1:3, 2:5, :]
 *   3. a strided slab: [::2, :, 1::2]
 *   4. fancy indices along axis 1: [:, {0, 2, 3, 7}, :] (a union of hyperslabs)
 *   5. every plane [t, :, :] in turn (a family along the first axis)
 *   6. ten points (row-major order), into a 1-D buffer
 *   7. (unless --no-memsel) the box [1:3, 2:5, 0:4] into the middle of a 4 x 5 x 6
 *      buffer filled with -1 (a memory hyperslab at (1, 1, 1)); the whole buffer
 *      is written.
 * With --twice the file is opened, read as above and closed twice in one process (OUT
 * gets both passes).
 * Exit status 1 with one line on any HDF5 failure.
 */
#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static FILE *out;
static hid_t dset;
static hsize_t d[3];

static void die(const char *what)
{
    fprintf(stderr, "vol_read: %s failed\n", what);
    exit(1);
}

/* Reads the file selection `fs` into a buffer shaped by `ms` (H5S_ALL: the dataset's
 * shape) of n doubles and appends them. */
static void read_into(hid_t ms, hid_t fs, size_t n)
{
    double *buf = malloc(n * sizeof *buf);
    if (!buf)
        die("malloc");
    if (H5Dread(dset, H5T_NATIVE_DOUBLE, ms, fs, H5P_DEFAULT, buf) < 0)
        die("H5Dread");
    fwrite(buf, sizeof *buf, n, out);
    free(buf);
}

static hid_t file_space(void)
{
    hid_t fs = H5Dget_space(dset);
    if (fs < 0)
        die("H5Dget_space");
    return fs;
}

static void slab(hid_t fs, H5S_seloper_t op, hsize_t s0, hsize_t s1, hsize_t s2, hsize_t st0,
                 hsize_t st1, hsize_t st2, hsize_t c0, hsize_t c1, hsize_t c2)
{
    hsize_t start[3] = {s0, s1, s2}, stride[3] = {st0, st1, st2}, count[3] = {c0, c1, c2};
    if (H5Sselect_hyperslab(fs, op, start, stride, count, NULL) < 0)
        die("H5Sselect_hyperslab");
}

static void read_slab(hid_t fs, int rank, hsize_t m0, hsize_t m1, hsize_t m2)
{
    hsize_t m[3] = {m0, m1, m2};
    const hsize_t *dims = rank == 3 ? m : rank == 2 ? m + 1 : m + 2;
    hid_t ms = H5Screate_simple(rank, dims, NULL);
    read_into(ms, fs, (size_t)(m0 * m1 * m2));
    H5Sclose(ms);
}

/* Opens the file, makes the reads above and closes it. */
static void one_pass(const char *path, const char *name, int memsel)
{
    hid_t file = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (file < 0)
        die("H5Fopen");
    dset = H5Dopen2(file, name, H5P_DEFAULT);
    if (dset < 0)
        die("H5Dopen2");
    hid_t fs = file_space();
    if (H5Sget_simple_extent_ndims(fs) != 3 || H5Sget_simple_extent_dims(fs, d, NULL) != 3 ||
        d[0] < 4 || d[1] < 8 || d[2] < 4) {
        fprintf(stderr, "vol_read: %s is not a 3-D dataset of at least 4 x 8 x 4\n", name);
        exit(1);
    }

    read_into(H5S_ALL, H5S_ALL, (size_t)(d[0] * d[1] * d[2])); /* 1 */

    slab(fs, H5S_SELECT_SET, 1, 2, 0, 1, 1, 1, 2, 3, d[2]); /* 2 */
    read_slab(fs, 3, 2, 3, d[2]);

    hsize_t c0 = (d[0] + 1) / 2, c2 = d[2] / 2; /* 3: [::2, :, 1::2] */
    slab(fs, H5S_SELECT_SET, 0, 0, 1, 2, 1, 2, c0, d[1], c2);
    read_slab(fs, 3, c0, d[1], c2);

    static const hsize_t fancy[4] = {0, 2, 3, 7}; /* 4 */
    for (int i = 0; i < 4; i++)
        slab(fs, i ? H5S_SELECT_OR : H5S_SELECT_SET, 0, fancy[i], 0, 1, 1, 1, d[0], 1, d[2]);
    read_slab(fs, 3, d[0], 4, d[2]);

    for (hsize_t t = 0; t < d[0]; t++) { /* 5 */
        slab(fs, H5S_SELECT_SET, t, 0, 0, 1, 1, 1, 1, d[1], d[2]);
        read_slab(fs, 2, 1, d[1], d[2]);
    }

    hsize_t pts[10][3], n = d[0] * d[1] * d[2], step = n / 10; /* 6 */
    for (hsize_t i = 0; i < 10; i++) { /* ascending linear indices: row-major order */
        hsize_t lin = i * step + (i * 7) % step;
        pts[i][0] = lin / (d[1] * d[2]);
        pts[i][1] = (lin / d[2]) % d[1];
        pts[i][2] = lin % d[2];
    }
    if (H5Sselect_elements(fs, H5S_SELECT_SET, 10, &pts[0][0]) < 0)
        die("H5Sselect_elements");
    hsize_t ten = 10;
    hid_t ms = H5Screate_simple(1, &ten, NULL);
    read_into(ms, fs, 10);
    H5Sclose(ms);

    if (memsel) { /* 7 */
        hsize_t md[3] = {4, 5, 6}, mstart[3] = {1, 1, 1}, mcount[3] = {2, 3, 4};
        double buf[4 * 5 * 6];
        for (int i = 0; i < 120; i++)
            buf[i] = -1;
        slab(fs, H5S_SELECT_SET, 1, 2, 0, 1, 1, 1, 2, 3, 4);
        ms = H5Screate_simple(3, md, NULL);
        if (H5Sselect_hyperslab(ms, H5S_SELECT_SET, mstart, NULL, mcount, NULL) < 0)
            die("H5Sselect_hyperslab (memory)");
        if (H5Dread(dset, H5T_NATIVE_DOUBLE, ms, fs, H5P_DEFAULT, buf) < 0)
            die("H5Dread");
        fwrite(buf, sizeof(double), 120, out);
        H5Sclose(ms);
    }

    H5Sclose(fs);
    H5Dclose(dset);
    if (H5Fclose(file) < 0)
        die("H5Fclose");
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: vol_read FILE DATASET OUT [--no-memsel] [--twice]\n");
        return 2;
    }
    int memsel = 1, passes = 1;
    for (int i = 4; i < argc; i++) {
        if (!strcmp(argv[i], "--no-memsel")) {
            memsel = 0;
        } else if (!strcmp(argv[i], "--twice")) {
            passes = 2;
        } else {
            fprintf(stderr, "vol_read: unknown option %s\n", argv[i]);
            return 2;
        }
    }
    if (!(out = fopen(argv[3], "wb")))
        die("fopen");
    for (int i = 0; i < passes; i++)
        one_pass(argv[1], argv[2], memsel);
    if (fclose(out) != 0)
        die("fclose");
    return 0;
}
