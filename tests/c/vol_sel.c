/* vol_sel.c - an unmodified HDF5 program for the VOL connector's tests: reads a list of
 * arbitrary selections of one dataset, each as doubles appended to OUT.
 *
 *   vol_sel FILE DATASET OUT SPECS
 *
 * SPECS holds one read per line, numbers separated by spaces:
 *   MRANK MDIM... A                      everything (H5S_ALL as the file selection)
 *   MRANK MDIM... H K (START STRIDE COUNT BLOCK)xK   K hyperslabs, the first set, the
 *                                        others OR'ed (each part RANK numbers)
 *   MRANK MDIM... P N (COORD...)xN       N points (RANK coordinates each), in order
 *   F                                    fork: the child reads the whole dataset once
 *                                        (not to OUT), closes and shuts HDF5 down
 *                                        (H5close), and exits; the parent waits
 * The memory dataspace is MDIM... with everything selected. Exit status 1 with one line
 * on a malformed line or an HDF5 failure.
 */
#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_RANK 8

static void die(const char *what, long line)
{
    fprintf(stderr, "vol_sel: %s (spec line %ld)\n", what, line);
    exit(1);
}

static hsize_t num(FILE *f, long line)
{
    unsigned long long v;
    if (fscanf(f, "%llu", &v) != 1)
        die("malformed spec", line);
    return (hsize_t)v;
}

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: vol_sel FILE DATASET OUT SPECS\n");
        return 2;
    }
    hid_t file = H5Fopen(argv[1], H5F_ACC_RDONLY, H5P_DEFAULT);
    hid_t dset = file < 0 ? -1 : H5Dopen2(file, argv[2], H5P_DEFAULT);
    if (dset < 0)
        die("cannot open the dataset", 0);
    hid_t fs = H5Dget_space(dset);
    int rank = H5Sget_simple_extent_ndims(fs);
    if (rank < 1 || rank > MAX_RANK)
        die("dataset rank not in 1..8", 0);
    FILE *out = fopen(argv[3], "wb"), *specs = fopen(argv[4], "r");
    if (!specs || !out)
        die("cannot open SPECS or OUT", 0);
    for (long line = 1;; line++) {
        int mrank;
        char fork_line;
        if (fscanf(specs, " %c", &fork_line) != 1)
            break;
        if (fork_line == 'F') {
            pid_t child = fork();
            if (child < 0)
                die("fork failed", line);
            if (child == 0) {
                hssize_t n = H5Sget_simple_extent_npoints(fs);
                double *all = n > 0 ? malloc((size_t)n * sizeof *all) : NULL;
                int ok = all && H5Dread(dset, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT,
                                        all) >= 0;
                ok = ok && H5Dclose(dset) >= 0 && H5Fclose(file) >= 0 && H5close() >= 0;
                _exit(ok ? 0 : 1);
            }
            int status = 0;
            if (waitpid(child, &status, 0) != child || !WIFEXITED(status) ||
                WEXITSTATUS(status) != 0)
                die("the forked child failed", line);
            continue;
        }
        ungetc(fork_line, specs);
        if (fscanf(specs, "%d", &mrank) != 1)
            break;
        if (mrank < 0 || mrank > MAX_RANK)
            die("memory rank not in 0..8", line);
        hsize_t mdims[MAX_RANK], n = 1;
        for (int i = 0; i < mrank; i++)
            n *= mdims[i] = num(specs, line);
        char kind;
        if (fscanf(specs, " %c", &kind) != 1)
            die("no selection kind", line);
        hid_t file_sel = fs;
        if (kind == 'A') {
            file_sel = H5S_ALL;
        } else if (kind == 'H') {
            hsize_t k = num(specs, line), v[4][MAX_RANK];
            for (hsize_t j = 0; j < k; j++) {
                for (int p = 0; p < 4; p++)
                    for (int i = 0; i < rank; i++)
                        v[p][i] = num(specs, line);
                if (H5Sselect_hyperslab(fs, j ? H5S_SELECT_OR : H5S_SELECT_SET, v[0], v[1], v[2],
                                        v[3]) < 0)
                    die("H5Sselect_hyperslab failed", line);
            }
        } else if (kind == 'P') {
            hsize_t k = num(specs, line);
            hsize_t *c = malloc((size_t)(k * (hsize_t)rank) * sizeof *c);
            if (!c)
                die("out of memory", line);
            for (hsize_t j = 0; j < k * (hsize_t)rank; j++)
                c[j] = num(specs, line);
            if (H5Sselect_elements(fs, H5S_SELECT_SET, (size_t)k, c) < 0)
                die("H5Sselect_elements failed", line);
            free(c);
        } else {
            die("unknown selection kind", line);
        }
        hid_t ms = mrank ? H5Screate_simple(mrank, mdims, NULL) : H5Screate(H5S_SCALAR);
        double *buf = malloc((size_t)n * sizeof *buf);
        if (ms < 0 || !buf)
            die("cannot make the memory space", line);
        if (H5Dread(dset, H5T_NATIVE_DOUBLE, kind == 'A' ? H5S_ALL : ms, file_sel, H5P_DEFAULT,
                    buf) < 0)
            die("H5Dread failed", line);
        fwrite(buf, sizeof *buf, (size_t)n, out);
        free(buf);
        H5Sclose(ms);
    }
    H5Sclose(fs);
    H5Dclose(dset);
    if (H5Fclose(file) < 0 || fclose(out) != 0)
        die("close failed", 0);
    fclose(specs);
    return 0;
}
