/*
 * tile_reader — an mpi-tile-io-like reader: the file is a 2-D array of
 * (tiles-y × tile-h) rows by (tiles-x × tile-w) columns of --elem-byte elements, row
 * major; rank r reads tiles r, r + size, … (tile t at column t % tiles-x, row
 * t / tiles-x), each through
 *   --mode all    a subarray file view and MPI_File_read_all (collective; default)
 *   --mode indep  the same view and MPI_File_read (independent)
 *   --mode rows   one MPI_File_read_at per tile row (default view)
 * and prints, on rank 0, "rank R bytes N fnv HEX" for every rank; --dump DIR also
 * writes each rank's bytes, in the order read, to DIR/rank<R>.bin.
 *
 *   tile_reader FILE [--tiles-x 2] [--tiles-y 2] [--tile-w 64] [--tile-h 64]
 *               [--elem 8] [--mode all|indep|rows] [--dump DIR] [--reps 1]
 */
#include "common.h"

int main(int argc, char **argv)
{
    int rank, size;
    start(&argc, &argv, "tile_reader FILE [--tiles-x N] [--tiles-y N] [--tile-w N] "
                  "[--tile-h N] [--elem BYTES] [--mode all|indep|rows] [--dump DIR] [--reps N]", &rank, &size);
    int tx = (int)opt_ll(argc, argv, "--tiles-x", 2), ty = (int)opt_ll(argc, argv, "--tiles-y", 2);
    int tw = (int)opt_ll(argc, argv, "--tile-w", 64), th = (int)opt_ll(argc, argv, "--tile-h", 64);
    int elem = (int)opt_ll(argc, argv, "--elem", 8), reps = (int)opt_ll(argc, argv, "--reps", 1);
    const char *mode = opt(argc, argv, "--mode", "all");
    int all = strcmp(mode, "all") == 0, indep = strcmp(mode, "indep") == 0;
    int rows = strcmp(mode, "rows") == 0;
    if (!all && !indep && !rows)
        die("unknown --mode %s", mode);
    if (!tx || !ty || !tw || !th || !elem)
        die("%s", "sizes must be positive");
    MPI_File fh = open_or_die(MPI_COMM_WORLD, argv[1], MPI_MODE_RDONLY);
    MPI_Datatype etype;
    MPI_Type_contiguous(elem, MPI_BYTE, &etype);
    MPI_Type_commit(&etype);
    size_t tile_bytes = (size_t)tw * th * elem;
    unsigned char *buf = malloc(tile_bytes);
    report_t rep;
    report_open(&rep, argc, argv, rank);
    int ntiles = tx * ty;
    /* the same number of collective calls on every rank: rounds of `size` tiles */
    int rounds = (ntiles + size - 1) / size;
    for (int k = 0; k < reps; k++)
        for (int round = 0; round < rounds; round++) {
            int t = round * size + rank;
            int have = t < ntiles;
            int gsizes[2] = {ty * th, tx * tw}, subs[2] = {th, tw};
            int starts[2] = {have ? (t / tx) * th : 0, have ? (t % tx) * tw : 0};
            if (rows) {
                if (!have)
                    continue;
                for (int r = 0; r < th; r++) {
                    MPI_Offset off = ((MPI_Offset)(starts[0] + r) * gsizes[1] + starts[1]) * elem;
                    MPI_Status st;
                    MPI_File_read_at(fh, off, buf + (size_t)r * tw * elem, tw, etype, &st);
                    expect_count(&st, etype, tw, "read_at");
                }
            } else {
                MPI_Datatype ft;
                MPI_Type_create_subarray(2, gsizes, subs, starts, MPI_ORDER_C, etype, &ft);
                MPI_Type_commit(&ft);
                MPI_File_set_view(fh, 0, etype, ft, "native", MPI_INFO_NULL);
                MPI_Status st;
                int n = have ? tw * th : 0;
                if (all)
                    MPI_File_read_all(fh, buf, n, etype, &st);
                else
                    MPI_File_read(fh, buf, n, etype, &st);
                expect_count(&st, etype, n, all ? "read_all" : "read");
                MPI_Type_free(&ft);
            }
            if (have)
                report_add(&rep, buf, tile_bytes);
        }
    report_close(&rep, rank, size);
    free(buf);
    MPI_Type_free(&etype);
    MPI_File_close(&fh);
    MPI_Finalize();
    return 0;
}
