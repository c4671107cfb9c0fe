/*
 * overhead — the cost of one small MPI_File_read_at: every rank opens FILE on
 * MPI_COMM_SELF and reads --calls × --size bytes at offsets (i × size) mod the file's
 * size (a cached file: the figure is the per-call cost, not the disk's). Rank 0 prints
 * {"calls", "seconds", "per_call_us", "pmpi_per_call_us", "overhead_pct"}. Run it with
 * and without libpatio_mpiio.so preloaded to see the layer's overhead on files it does
 * not serve. Batches of 1000 MPI_File_read_at calls (through a preloaded layer)
 * alternate with batches of PMPI_File_read_at (straight to MPI), so the two figures
 * share the machine's conditions; without the layer they differ only by noise.
 *
 *   overhead FILE [--calls 200000] [--size 4096]
 */
#include "common.h"

int main(int argc, char **argv)
{
    int rank, size;
    start(&argc, &argv, "overhead FILE [--calls N] [--size BYTES]", &rank, &size);
    long long calls = opt_ll(argc, argv, "--calls", 200000), n = opt_ll(argc, argv, "--size", 4096);
    MPI_File fh = open_or_die(MPI_COMM_SELF, argv[1], MPI_MODE_RDONLY);
    MPI_Offset fsize;
    MPI_File_get_size(fh, &fsize);
    if (n <= 0 || fsize < n)
        die("%s is smaller than --size", argv[1]);
    long long slots = fsize / n;
    char *buf = malloc((size_t)n);
    MPI_Status st;
    for (long long i = 0; i < slots && i < 1024; i++) /* warm the page cache */
        MPI_File_read_at(fh, (MPI_Offset)(i * n), buf, (int)n, MPI_BYTE, &st);
    double t_mpi = 0, t_pmpi = 0;
    long long done = 0;
    const long long batch = 1000;
    while (done < calls) {
        long long k = calls - done < batch ? calls - done : batch;
        double t0 = MPI_Wtime();
        for (long long i = done; i < done + k; i++)
            MPI_File_read_at(fh, (MPI_Offset)((i % slots) * n), buf, (int)n, MPI_BYTE, &st);
        double t1 = MPI_Wtime();
        for (long long i = done; i < done + k; i++)
            PMPI_File_read_at(fh, (MPI_Offset)((i % slots) * n), buf, (int)n, MPI_BYTE, &st);
        t_pmpi += MPI_Wtime() - t1;
        t_mpi += t1 - t0;
        done += k;
    }
    if (rank == 0)
        printf("{\"calls\": %lld, \"seconds\": %.6f, \"per_call_us\": %.4f, "
               "\"pmpi_per_call_us\": %.4f, \"overhead_pct\": %.2f}\n",
               calls, t_mpi, calls ? t_mpi * 1e6 / (double)calls : 0.0,
               calls ? t_pmpi * 1e6 / (double)calls : 0.0,
               t_pmpi > 0 ? (t_mpi / t_pmpi - 1) * 100 : 0.0);
    free(buf);
    MPI_File_close(&fh);
    MPI_Finalize();
    return 0;
}
