/* vol_write.c - an unmodified HDF5 program that changes a dataset in place, for the VOL
 * connector's tests: writes VALUE to element (0, 0, 0) of the 3-D dataset DATASET of
 * FILE and, with --extend, grows its first axis by one (a chunked dataset with an
 * unlimited first axis).
 *
 *   vol_write FILE DATASET VALUE [--extend]
 *
 * Exit status 1 with one line on any HDF5 failure.
 */
#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void die(const char *what)
{
    fprintf(stderr, "vol_write: %s failed\n", what);
    exit(1);
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: vol_write FILE DATASET VALUE [--extend]\n");
        return 2;
    }
    double value = strtod(argv[3], NULL);
    hid_t file = H5Fopen(argv[1], H5F_ACC_RDWR, H5P_DEFAULT);
    if (file < 0)
        die("H5Fopen");
    hid_t dset = H5Dopen2(file, argv[2], H5P_DEFAULT);
    if (dset < 0)
        die("H5Dopen2");
    if (argc > 4 && !strcmp(argv[4], "--extend")) {
        hsize_t d[3];
        hid_t s = H5Dget_space(dset);
        if (s < 0 || H5Sget_simple_extent_dims(s, d, NULL) != 3)
            die("H5Dget_space");
        H5Sclose(s);
        d[0] += 1;
        if (H5Dset_extent(dset, d) < 0)
            die("H5Dset_extent");
    } else {
        hid_t fs = H5Dget_space(dset);
        hsize_t start[3] = {0, 0, 0}, count[3] = {1, 1, 1}, one = 1;
        hid_t ms = H5Screate_simple(1, &one, NULL);
        if (fs < 0 || ms < 0 ||
            H5Sselect_hyperslab(fs, H5S_SELECT_SET, start, NULL, count, NULL) < 0 ||
            H5Dwrite(dset, H5T_NATIVE_DOUBLE, ms, fs, H5P_DEFAULT, &value) < 0)
            die("H5Dwrite");
        H5Sclose(ms);
        H5Sclose(fs);
    }
    if (H5Dclose(dset) < 0 || H5Fclose(file) < 0)
        die("H5Fclose");
    return 0;
}
