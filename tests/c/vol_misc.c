/* vol_misc.c - the VOL connector's edge cases from an unmodified HDF5 program: a
 * multi-dataset read, H5S_BLOCK as the memory space, and reads patio does not record
 * (a scalar dataset, a string dataset, an empty selection).
 *
 *   vol_misc FILE OUT
 *
 * FILE holds /chunked and /contiguous (3-D, at least 2 x 3 x 4), /scalar (a double)
 * and /names (fixed-length strings of 8 bytes, at least one). Appends, as read:
 *   1. /chunked and /contiguous whole, in one H5Dread_multi (doubles)
 *   2. /chunked [0:2, 0:3, 0:4] into H5S_BLOCK memory (doubles)
 *   3. /scalar (a double)
 *   4. /names[0] (8 bytes)
 *   5. nothing: an empty selection of /chunked is read
 * After opening FILE (perhaps a relative path) it changes to the root directory, so
 * the reads are made with another current directory than the open.
 * Exit status 1 with one line on any HDF5 failure.
 */
#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static void die(const char *what)
{
    fprintf(stderr, "vol_misc: %s failed\n", what);
    exit(1);
}

static hid_t open_dset(hid_t file, const char *name, hsize_t *n)
{
    hid_t d = H5Dopen2(file, name, H5P_DEFAULT);
    if (d < 0)
        die("H5Dopen2");
    hid_t s = H5Dget_space(d);
    hssize_t k = H5Sget_simple_extent_npoints(s);
    if (k < 0)
        die("H5Sget_simple_extent_npoints");
    *n = (hsize_t)k;
    H5Sclose(s);
    return d;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: vol_misc FILE OUT\n");
        return 2;
    }
    hid_t file = H5Fopen(argv[1], H5F_ACC_RDONLY, H5P_DEFAULT);
    FILE *out = fopen(argv[2], "wb");
    if (file < 0 || !out)
        die("opening FILE or OUT");
    if (chdir("/") != 0)
        die("chdir");
    hsize_t n[2], dummy;
    hid_t d[2] = {open_dset(file, "/chunked", &n[0]), open_dset(file, "/contiguous", &n[1])};
    double *b[2] = {malloc(n[0] * sizeof(double)), malloc(n[1] * sizeof(double))};
    hid_t types[2] = {H5T_NATIVE_DOUBLE, H5T_NATIVE_DOUBLE}, all[2] = {H5S_ALL, H5S_ALL};
    void *bufs[2] = {b[0], b[1]};
    if (!b[0] || !b[1] || H5Dread_multi(2, d, types, all, all, H5P_DEFAULT, bufs) < 0)
        die("H5Dread_multi");
    fwrite(b[0], sizeof(double), n[0], out);
    fwrite(b[1], sizeof(double), n[1], out);

    hid_t fs = H5Dget_space(d[0]);
    hsize_t start[3] = {0, 0, 0}, count[3] = {2, 3, 4};
    if (H5Sselect_hyperslab(fs, H5S_SELECT_SET, start, NULL, count, NULL) < 0 ||
        H5Dread(d[0], H5T_NATIVE_DOUBLE, H5S_BLOCK, fs, H5P_DEFAULT, b[0]) < 0)
        die("H5Dread into H5S_BLOCK");
    fwrite(b[0], sizeof(double), 24, out);

    double scalar;
    hid_t s = open_dset(file, "/scalar", &dummy);
    if (H5Dread(s, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, &scalar) < 0)
        die("H5Dread of /scalar");
    fwrite(&scalar, sizeof scalar, 1, out);

    char name[8];
    hid_t names = open_dset(file, "/names", &dummy), nfs = H5Dget_space(names);
    hid_t str = H5Tcopy(H5T_C_S1);
    hsize_t first[1] = {0}, one[1] = {1};
    hid_t nms = H5Screate_simple(1, one, NULL);
    if (H5Tset_size(str, 8) < 0 ||
        H5Sselect_hyperslab(nfs, H5S_SELECT_SET, first, NULL, one, NULL) < 0 ||
        H5Dread(names, str, nms, nfs, H5P_DEFAULT, name) < 0)
        die("H5Dread of /names");
    fwrite(name, 1, sizeof name, out);

    hsize_t zero[1] = {0};
    hid_t none = H5Screate_simple(1, zero, NULL);
    if (H5Sselect_none(fs) < 0 || H5Dread(d[0], H5T_NATIVE_DOUBLE, none, fs, H5P_DEFAULT, b[0]) < 0)
        die("H5Dread of an empty selection");

    H5Sclose(none);
    H5Sclose(nms);
    H5Sclose(nfs);
    H5Sclose(fs);
    H5Tclose(str);
    H5Dclose(names);
    H5Dclose(s);
    H5Dclose(d[0]);
    H5Dclose(d[1]);
    free(b[0]);
    free(b[1]);
    if (H5Fclose(file) < 0 || fclose(out) != 0)
        die("close");
    return 0;
}
