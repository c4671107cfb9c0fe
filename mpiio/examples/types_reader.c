/*
 * types_reader — reads FILE through file views built from every kind of derived
 * datatype, one --case at a time, so that a run with and without the MPI-IO layer can
 * be compared byte for byte. FILE is opened on a communicator freed right after the
 * open. Rank r sets the view (displacement depends on r), reads
 * 3½ filetypes' worth with MPI_File_read_all, then reads on with MPI_File_read (one
 * filetype's worth a call, into every other etype of a vector memory datatype) until
 * the end of the file (the last read short). It writes the buffers, in order, to
 * DIR/rank<r>.bin (--dump DIR), the bytes read, in order, to DIR/rank<r>.data, and prints
 * "rank R bytes N fnv HEX" lines on rank 0.
 *
 *   types_reader FILE --case contiguous|hvector|hindexed|indexed_block|hindexed_block|
 *                resized|dup|subarray_f|struct|nested|darray|darray_2d|darray_f [--dump DIR]
 */
#include "common.h"

static MPI_Datatype filetype(const char *c, int rank, int size, MPI_Datatype *etype,
                             MPI_Offset *disp)
{
    MPI_Datatype t, u;
    *etype = MPI_INT;
    *disp = (MPI_Offset)rank * 12;
    if (!strcmp(c, "contiguous")) {
        MPI_Type_contiguous(16, MPI_INT, &u);
        MPI_Type_create_resized(u, 0, 64 * size, &t);
        MPI_Type_free(&u);
        *disp = (MPI_Offset)rank * 64;
    } else if (!strcmp(c, "hvector")) {
        MPI_Type_create_hvector(4, 3, 48 * size, MPI_INT, &t);
    } else if (!strcmp(c, "hindexed")) {
        int bl[4] = {1, 2, 3, 4};
        MPI_Aint d[4] = {0, 40, 100, 200};
        MPI_Type_create_hindexed(4, bl, d, MPI_INT, &t);
    } else if (!strcmp(c, "indexed_block")) {
        int d[4] = {0, 5, 9, 20};
        MPI_Type_create_indexed_block(4, 2, d, MPI_INT, &t);
    } else if (!strcmp(c, "hindexed_block")) {
        MPI_Aint d[3] = {8, 64, 200};
        MPI_Type_create_hindexed_block(3, 3, d, MPI_INT, &t);
    } else if (!strcmp(c, "resized")) {
        MPI_Type_vector(4, 2, 5, MPI_INT, &u);
        MPI_Type_create_resized(u, 0, 400, &t);
        MPI_Type_free(&u);
    } else if (!strcmp(c, "dup")) {
        MPI_Type_vector(3, 4, 10, MPI_INT, &u);
        MPI_Type_dup(u, &t);
        MPI_Type_free(&u);
    } else if (!strcmp(c, "subarray_f")) {
        int sizes[2] = {20, 12}, subs[2] = {5, 4}, starts[2] = {(rank * 5) % 20, 2};
        MPI_Type_create_subarray(2, sizes, subs, starts, MPI_ORDER_FORTRAN, MPI_INT, &t);
        *disp = 0;
    } else if (!strcmp(c, "struct") || !strcmp(c, "nested")) {
        MPI_Datatype three;
        MPI_Type_contiguous(3, MPI_INT, &three);
        int bl[3] = {2, 1, 1};
        MPI_Aint d[3] = {0, 16, 40};
        MPI_Datatype ty[3] = {MPI_INT, MPI_DOUBLE, three};
        MPI_Type_create_struct(3, bl, d, ty, &u);
        MPI_Type_free(&three);
        *etype = MPI_BYTE;
        if (!strcmp(c, "struct")) {
            t = u;
        } else { /* a vector of (resized struct) */
            MPI_Datatype r;
            MPI_Type_create_resized(u, 0, 64, &r);
            MPI_Type_vector(3, 2, 5, r, &t);
            MPI_Type_free(&r);
            MPI_Type_free(&u);
        }
    } else if (!strcmp(c, "darray")) {
        int g[1] = {64 * size}, dist[1] = {MPI_DISTRIBUTE_CYCLIC}, darg[1] = {4}, p[1] = {size};
        MPI_Type_create_darray(size, rank, 1, g, dist, darg, p, MPI_ORDER_C, MPI_INT, &t);
        *disp = 0;
    } else if (!strcmp(c, "darray_2d")) { /* block × block-cyclic on a 2 × size/2 grid */
        int two = size % 2 == 0 ? 2 : 1;
        int g[2] = {10, 36}, dist[2] = {MPI_DISTRIBUTE_BLOCK, MPI_DISTRIBUTE_CYCLIC};
        int darg[2] = {MPI_DISTRIBUTE_DFLT_DARG, 3}, p[2] = {two, size / two};
        MPI_Type_create_darray(size, rank, 2, g, dist, darg, p, MPI_ORDER_C, MPI_INT, &t);
        *disp = 16;
    } else if (!strcmp(c, "darray_f")) { /* Fortran order: cyclic(2) × none × block(5) */
        int g[3] = {13, 3, 7}, p[3] = {1, 1, size};
        int dist[3] = {MPI_DISTRIBUTE_CYCLIC, MPI_DISTRIBUTE_NONE, MPI_DISTRIBUTE_BLOCK};
        int darg[3] = {2, MPI_DISTRIBUTE_DFLT_DARG, 2};
        MPI_Type_create_darray(size, rank, 3, g, dist, darg, p, MPI_ORDER_FORTRAN, MPI_INT, &t);
        *disp = 4;
    } else {
        die("unknown --case %s", c);
        t = MPI_DATATYPE_NULL;
    }
    MPI_Type_commit(&t);
    return t;
}

int main(int argc, char **argv)
{
    int rank, size;
    start(&argc, &argv, "types_reader FILE --case CASE [--dump DIR]", &rank, &size);
    const char *c = opt(argc, argv, "--case", "hvector");
    /* the file outlives the communicator it was opened on (MPI allows freeing it) */
    MPI_Comm comm;
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    MPI_File fh = open_or_die(comm, argv[1], MPI_MODE_RDONLY);
    MPI_Comm_free(&comm);
    MPI_Datatype etype, ft;
    MPI_Offset disp;
    ft = filetype(c, rank, size, &etype, &disp);
    MPI_File_set_view(fh, disp, etype, ft, "native", MPI_INFO_NULL);
    int ftsize, esize;
    MPI_Type_size(ft, &ftsize);
    MPI_Type_size(etype, &esize);
    int per = ftsize / esize; /* etypes in one filetype */
    report_t rep;
    report_open(&rep, argc, argv, rank);
    FILE *data = NULL; /* the bytes read, in order */
    if (opt(argc, argv, "--dump", NULL)) {
        char path[4096];
        snprintf(path, sizeof path, "%s/rank%d.data", opt(argc, argv, "--dump", NULL), rank);
        if (!(data = fopen(path, "wb")))
            die("cannot write %s", path);
    }
    int n = per * 3 + per / 2;
    char *buf = malloc((size_t)n * (size_t)esize);
    MPI_Status st;
    int bytes;
    MPI_File_read_all(fh, buf, n, etype, &st);
    MPI_Get_count(&st, MPI_BYTE, &bytes);
    report_add(&rep, buf, (size_t)bytes);
    if (data)
        fwrite(buf, 1, (size_t)bytes, data);
    /* on to the end of the file, into every other etype of a vector memory type (the
     * last read, cut short, fills part of it) */
    MPI_Datatype spaced;
    MPI_Type_vector(per, 1, 2, etype, &spaced);
    MPI_Type_commit(&spaced);
    char *wide = malloc((size_t)per * 2 * (size_t)esize);
    do {
        memset(wide, 0, (size_t)per * 2 * (size_t)esize);
        MPI_File_read(fh, wide, 1, spaced, &st);
        MPI_Get_count(&st, MPI_BYTE, &bytes);
        report_add(&rep, wide, (size_t)per * 2 * (size_t)esize);
        for (int j = 0; data && j * esize < bytes; j++) {
            int n = bytes - j * esize < esize ? bytes - j * esize : esize;
            fwrite(wide + (size_t)j * 2 * (size_t)esize, 1, (size_t)n, data);
        }
    } while (bytes == ftsize);
    if (data)
        fclose(data);
    free(wide);
    MPI_Type_free(&spaced);
    MPI_Offset pos;
    MPI_File_get_position(fh, &pos);
    unsigned long long p = (unsigned long long)pos;
    report_add(&rep, &p, sizeof p);
    report_close(&rep, rank, size);
    free(buf);
    MPI_Type_free(&ft);
    MPI_File_close(&fh);
    MPI_Finalize();
    return 0;
}
