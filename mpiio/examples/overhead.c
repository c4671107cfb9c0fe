/*
 * overhead — the cost of one small MPI_File_read_at: every rank opens FILE on
 * MPI_COMM_SELF and reads --calls × --size bytes at offsets (i × size) mod the file's
 * size (a cached file: the figure is the per-call cost, not the disk's). Rank 0 prints
 * {"calls", "seconds", "per_call_us"}. Run it with and without libpatio_mpiio.so
 * preloaded to see the layer's overhead on files it does not serve.
 *
 *   overhead FILE [--calls 200000] [--size 4096]
 */
#include "common.h"

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (argc < 2 || argv[1][0] == '-')
        die("%s", "usage: overhead FILE [--calls N] [--size BYTES]");
    long long calls = opt_ll(argc, argv, "--calls", 200000), n = opt_ll(argc, argv, "--size", 4096);
    MPI_File fh;
    if (MPI_File_open(MPI_COMM_SELF, argv[1], MPI_MODE_RDONLY, MPI_INFO_NULL, &fh) != MPI_SUCCESS)
        die("cannot open %s", argv[1]);
    MPI_Offset fsize;
    MPI_File_get_size(fh, &fsize);
    if (n <= 0 || fsize < n)
        die("%s is smaller than --size", argv[1]);
    long long slots = fsize / n;
    char *buf = malloc((size_t)n);
    MPI_Status st;
    for (long long i = 0; i < slots && i < 1024; i++) /* warm the page cache */
        MPI_File_read_at(fh, (MPI_Offset)(i * n), buf, (int)n, MPI_BYTE, &st);
    double t0 = MPI_Wtime();
    for (long long i = 0; i < calls; i++)
        MPI_File_read_at(fh, (MPI_Offset)((i % slots) * n), buf, (int)n, MPI_BYTE, &st);
    double t = MPI_Wtime() - t0;
    if (rank == 0)
        printf("{\"calls\": %lld, \"seconds\": %.6f, \"per_call_us\": %.4f}\n", calls, t,
               calls ? t * 1e6 / (double)calls : 0.0);
    free(buf);
    MPI_File_close(&fh);
    MPI_Finalize();
    return 0;
}
