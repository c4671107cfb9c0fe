/*
 * ior_reader — an IOR-like segmented reader: the file holds --segments segments of
 * `size` blocks of --block bytes; rank r reads block r of every segment (at
 * (s × size + r) × block) in --transfer-byte transfers, through
 *   --mode at        MPI_File_read_at (default)
 *   --mode at_all    MPI_File_read_at_all
 *   --mode iread_at  MPI_File_iread_at, a block's transfers in flight at once (Waitall)
 *   --mode seek      MPI_File_seek + MPI_File_read (individual pointer), checked with
 *                    MPI_File_get_position, SEEK_CUR back and re-read, SEEK_END, and a
 *                    short read at the end of the file
 *   --mode split     split collectives: read_at_all_begin/end and read_all_begin/end
 *   --mode nb        MPI_File_iread, MPI_File_iread_all and MPI_File_iread_at_all
 *   --mode view      a vector file view of the rank's blocks read with MPI_File_read_all
 *                    into a struct memory datatype (transfer pairs swapped), then again
 *                    with MPI_File_iread_at_all into an indexed one (transfers reversed)
 *   --mode ordered   MPI_File_read_ordered, a block per rank per segment (the shared
 *                    pointer walks the segments: rank r gets the same blocks); then the
 *                    shared position is checked, MPI_File_seek_shared goes back one
 *                    segment (SEEK_CUR) and the last segment is read again
 *   --mode shared    MPI_File_read_shared, the ranks taking turns (same blocks), the
 *                    last segment with MPI_File_read_ordered; then the shared position
 *                    is checked, MPI_File_seek_shared goes to 0 and a turn more reads
 *                    block r of segment 0
 *   --mode write     opens FILE read-write (created if missing) and writes the rank's
 *                    blocks (byte at offset o: (o × 7 + o / 4096) mod 256) with
 *                    write_at_all, seek + write, iwrite_at and write_all_begin/end in
 *                    turn, then reads back the next rank's blocks with read_at
 *   --mode rw        opens an existing FILE read-write: reads the rank's blocks (read_at),
 *                    writes them as --mode write does (seek + write), reads them back at
 *                    once (read_at), then after sync-barrier-sync reads the next rank's
 *                    blocks (read_at_all) and, from shared position 0, block r of
 *                    segment 0 (read_ordered)
 * Every read's MPI_Get_count is checked. Rank 0 prints "rank R bytes N fnv HEX" for
 * every rank; --dump DIR writes each rank's bytes, in the order read, to DIR/rank<R>.bin.
 *
 *   ior_reader FILE [--block 65536] [--transfer 4096] [--segments 4] [--mode MODE]
 *              [--dump DIR] [--reps 1]
 */
#include "common.h"

static long long B, T, S;
static int rank, size;

static MPI_Offset block_at(long long s) { return (MPI_Offset)((s * size + rank) * B); }

static void check_pos(MPI_File fh, MPI_Offset want, const char *what)
{
    MPI_Offset pos;
    MPI_File_get_position(fh, &pos);
    if (pos != want) {
        fprintf(stderr, "error: %s: position %lld, expected %lld\n", what, (long long)pos,
                (long long)want);
        MPI_Abort(MPI_COMM_WORLD, 3);
    }
}

static void read_blocks(MPI_File fh, const char *mode, unsigned char *buf, report_t *rep)
{
    int nt = (int)(B / T);
    MPI_Request *reqs = malloc(sizeof *reqs * (size_t)nt);
    MPI_Status *sts = malloc(sizeof *sts * (size_t)nt);
    for (long long s = 0; s < S; s++) {
        MPI_Offset base = block_at(s);
        MPI_Status st;
        if (!strcmp(mode, "iread_at")) {
            for (int i = 0; i < nt; i++)
                MPI_File_iread_at(fh, base + i * T, buf + i * T, (int)T, MPI_BYTE, &reqs[i]);
            MPI_Waitall(nt, reqs, sts);
            for (int i = 0; i < nt; i++)
                expect_count(&sts[i], MPI_BYTE, (int)T, "iread_at");
        } else if (!strcmp(mode, "seek")) {
            MPI_File_seek(fh, base, MPI_SEEK_SET);
            for (int i = 0; i < nt; i++) {
                MPI_File_read(fh, buf + i * T, (int)T, MPI_BYTE, &st);
                expect_count(&st, MPI_BYTE, (int)T, "read");
                check_pos(fh, base + (i + 1) * T, "read");
            }
            unsigned char *again = malloc((size_t)T);
            MPI_File_seek(fh, -B, MPI_SEEK_CUR);
            check_pos(fh, base, "seek cur");
            MPI_File_read(fh, again, (int)T, MPI_BYTE, &st);
            if (memcmp(again, buf, (size_t)T) != 0) {
                fprintf(stderr, "error: re-read after SEEK_CUR differs\n");
                MPI_Abort(MPI_COMM_WORLD, 3);
            }
            free(again);
        } else if (!strcmp(mode, "split")) {
            for (int i = 0; i < nt; i++) {
                if (i % 2 == 0) {
                    MPI_File_read_at_all_begin(fh, base + i * T, buf + i * T, (int)T, MPI_BYTE);
                    MPI_File_read_at_all_end(fh, buf + i * T, &st);
                } else {
                    MPI_File_seek(fh, base + i * T, MPI_SEEK_SET);
                    MPI_File_read_all_begin(fh, buf + i * T, (int)T, MPI_BYTE);
                    MPI_File_read_all_end(fh, buf + i * T, &st);
                    check_pos(fh, base + (i + 1) * T, "read_all_end");
                }
                expect_count(&st, MPI_BYTE, (int)T, "split collective");
            }
        } else if (!strcmp(mode, "nb")) {
            MPI_Request r;
            for (int i = 0; i < nt; i++) {
                if (i % 3 == 0) {
                    MPI_File_seek(fh, base + i * T, MPI_SEEK_SET);
                    MPI_File_iread(fh, buf + i * T, (int)T, MPI_BYTE, &r);
                } else if (i % 3 == 1) {
                    MPI_File_seek(fh, base + i * T, MPI_SEEK_SET);
                    MPI_File_iread_all(fh, buf + i * T, (int)T, MPI_BYTE, &r);
                } else {
                    MPI_File_iread_at_all(fh, base + i * T, buf + i * T, (int)T, MPI_BYTE, &r);
                }
                MPI_Wait(&r, &st);
                expect_count(&st, MPI_BYTE, (int)T, "nonblocking read");
            }
        } else if (!strcmp(mode, "ordered")) {
            MPI_File_read_ordered(fh, buf, (int)B, MPI_BYTE, &st);
            expect_count(&st, MPI_BYTE, (int)B, "read_ordered");
        } else if (!strcmp(mode, "shared") && s == S - 1) {
            /* the last segment ordered: the shared pointer where the turns left it */
            MPI_File_read_ordered(fh, buf, (int)B, MPI_BYTE, &st);
            expect_count(&st, MPI_BYTE, (int)B, "read_ordered after read_shared");
        } else if (!strcmp(mode, "shared")) {
            for (int k = 0; k < size; k++) {
                if (k == rank) {
                    MPI_File_read_shared(fh, buf, (int)B, MPI_BYTE, &st);
                    expect_count(&st, MPI_BYTE, (int)B, "read_shared");
                }
                MPI_Barrier(MPI_COMM_WORLD);
            }
        } else {
            int all = !strcmp(mode, "at_all");
            if (!all && strcmp(mode, "at"))
                die("unknown --mode %s", mode);
            for (int i = 0; i < nt; i++) {
                if (all)
                    MPI_File_read_at_all(fh, base + i * T, buf + i * T, (int)T, MPI_BYTE, &st);
                else
                    MPI_File_read_at(fh, base + i * T, buf + i * T, (int)T, MPI_BYTE, &st);
                expect_count(&st, MPI_BYTE, (int)T, all ? "read_at_all" : "read_at");
            }
        }
        report_add(rep, buf, (size_t)B);
    }
    if (!strcmp(mode, "ordered") || !strcmp(mode, "shared")) {
        MPI_Offset pos;
        MPI_Status st;
        MPI_File_get_position_shared(fh, &pos);
        if (pos != (MPI_Offset)(S * size * B)) {
            fprintf(stderr, "error: shared position %lld, expected %lld\n", (long long)pos,
                    S * size * B);
            MPI_Abort(MPI_COMM_WORLD, 3);
        }
        if (!strcmp(mode, "ordered")) {
            MPI_File_seek_shared(fh, -(MPI_Offset)(size * B), MPI_SEEK_CUR);
            MPI_File_read_ordered(fh, buf, (int)B, MPI_BYTE, &st);
            expect_count(&st, MPI_BYTE, (int)B, "read_ordered after seek_shared");
        } else {
            MPI_File_seek_shared(fh, 0, MPI_SEEK_SET);
            for (int k = 0; k < size; k++) {
                if (k == rank) {
                    MPI_File_read_shared(fh, buf, (int)B, MPI_BYTE, &st);
                    expect_count(&st, MPI_BYTE, (int)B, "read_shared after seek_shared");
                }
                MPI_Barrier(MPI_COMM_WORLD);
            }
        }
        report_add(rep, buf, (size_t)B);
    }
    if (!strcmp(mode, "seek")) {
        MPI_Offset fsize;
        MPI_File_get_size(fh, &fsize);
        MPI_File_seek(fh, 0, MPI_SEEK_END);
        check_pos(fh, fsize, "seek end");
        /* a short read at the end of the file */
        MPI_Status st;
        long long tail = T / 2 > 0 ? T / 2 : 1;
        MPI_File_read_at(fh, fsize - tail, buf, (int)T, MPI_BYTE, &st);
        expect_count(&st, MPI_BYTE, (int)tail, "read_at at the end of the file");
        report_add(rep, buf, (size_t)tail);
    }
    free(reqs);
    free(sts);
}

static void fill_written(unsigned char *buf, MPI_Offset base)
{
    for (long long i = 0; i < B; i++) {
        long long o = base + i;
        buf[i] = (unsigned char)((o * 7 + o / 4096) & 0xff);
    }
}

static void sync_barrier_sync(MPI_File fh)
{
    MPI_File_sync(fh);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_File_sync(fh);
}

static void read_write_blocks(MPI_File fh, unsigned char *buf, report_t *rep)
{
    MPI_Status st;
    for (long long s = 0; s < S; s++) {
        MPI_File_read_at(fh, block_at(s), buf, (int)B, MPI_BYTE, &st);
        expect_count(&st, MPI_BYTE, (int)B, "read_at before the writes");
        report_add(rep, buf, (size_t)B);
    }
    for (long long s = 0; s < S; s++) {
        fill_written(buf, block_at(s));
        MPI_File_seek(fh, block_at(s), MPI_SEEK_SET);
        MPI_File_write(fh, buf, (int)B, MPI_BYTE, &st);
        expect_count(&st, MPI_BYTE, (int)B, "write");
        check_pos(fh, block_at(s) + B, "write");
        memset(buf, 0, (size_t)B);
        MPI_File_read_at(fh, block_at(s), buf, (int)B, MPI_BYTE, &st);
        expect_count(&st, MPI_BYTE, (int)B, "read_at of the rank's own write");
        report_add(rep, buf, (size_t)B);
    }
    sync_barrier_sync(fh);
    for (long long s = 0; s < S; s++) {
        MPI_Offset at = (MPI_Offset)((s * size + (rank + 1) % size) * B);
        MPI_File_read_at_all(fh, at, buf, (int)B, MPI_BYTE, &st);
        expect_count(&st, MPI_BYTE, (int)B, "read_at_all after the writes");
        report_add(rep, buf, (size_t)B);
    }
    MPI_File_seek_shared(fh, 0, MPI_SEEK_SET);
    MPI_File_read_ordered(fh, buf, (int)B, MPI_BYTE, &st);
    expect_count(&st, MPI_BYTE, (int)B, "read_ordered after the writes");
    report_add(rep, buf, (size_t)B);
}

static void write_blocks(MPI_File fh, unsigned char *buf, report_t *rep)
{
    for (long long s = 0; s < S; s++) {
        MPI_Offset base = block_at(s);
        fill_written(buf, base);
        MPI_Status st;
        MPI_Request r;
        switch (s % 4) {
        case 0:
            MPI_File_write_at_all(fh, base, buf, (int)B, MPI_BYTE, &st);
            break;
        case 1:
            MPI_File_seek(fh, base, MPI_SEEK_SET);
            MPI_File_write(fh, buf, (int)B, MPI_BYTE, &st);
            break;
        case 2:
            MPI_File_iwrite_at(fh, base, buf, (int)B, MPI_BYTE, &r);
            MPI_Wait(&r, &st);
            break;
        default:
            MPI_File_seek(fh, base, MPI_SEEK_SET);
            MPI_File_write_all_begin(fh, buf, (int)B, MPI_BYTE);
            MPI_File_write_all_end(fh, buf, &st);
        }
        expect_count(&st, MPI_BYTE, (int)B, "write");
    }
    sync_barrier_sync(fh);
    for (long long s = 0; s < S; s++) {
        MPI_Status st;
        MPI_Offset at = (MPI_Offset)((s * size + (rank + 1) % size) * B);
        MPI_File_read_at(fh, at, buf, (int)B, MPI_BYTE, &st);
        expect_count(&st, MPI_BYTE, (int)B, "read_at after the writes");
        report_add(rep, buf, (size_t)B);
    }
}

static void read_view(MPI_File fh, unsigned char *buf, report_t *rep)
{
    /* the file view: the rank's blocks */
    MPI_Datatype ft;
    MPI_Type_vector((int)S, (int)B, (int)(size * B), MPI_BYTE, &ft);
    MPI_Type_commit(&ft);
    MPI_File_set_view(fh, (MPI_Offset)(rank * B), MPI_BYTE, ft, "native", MPI_INFO_NULL);
    long long total = S * B, pairs = total / (2 * T);
    /* struct memory type: transfer pairs swapped */
    int lens[2] = {(int)T, (int)T};
    MPI_Aint disps[2] = {(MPI_Aint)T, 0};
    MPI_Datatype types[2] = {MPI_BYTE, MPI_BYTE}, pair;
    MPI_Type_create_struct(2, lens, disps, types, &pair);
    MPI_Type_commit(&pair);
    MPI_Status st;
    memset(buf, 0, (size_t)total);
    MPI_File_read_all(fh, buf, (int)pairs, pair, &st);
    expect_count(&st, pair, (int)pairs, "read_all into a struct type");
    report_add(rep, buf, (size_t)total);
    /* indexed memory type: transfers in reverse order */
    int nt = (int)(total / T);
    int *bl = malloc(sizeof(int) * (size_t)nt), *dl = malloc(sizeof(int) * (size_t)nt);
    for (int i = 0; i < nt; i++) {
        bl[i] = (int)T;
        dl[i] = (int)((nt - 1 - i) * T);
    }
    MPI_Datatype rev;
    MPI_Type_indexed(nt, bl, dl, MPI_BYTE, &rev);
    MPI_Type_commit(&rev);
    MPI_Request r;
    memset(buf, 0, (size_t)total);
    MPI_File_iread_at_all(fh, 0, buf, 1, rev, &r);
    MPI_Wait(&r, &st);
    expect_count(&st, rev, 1, "iread_at_all into an indexed type");
    report_add(rep, buf, (size_t)total);
    free(bl);
    free(dl);
    MPI_Type_free(&rev);
    MPI_Type_free(&pair);
    MPI_Type_free(&ft);
}

int main(int argc, char **argv)
{
    start(&argc, &argv,
          "ior_reader FILE [--block BYTES] [--transfer BYTES] [--segments N] "
          "[--mode at|at_all|iread_at|seek|split|nb|view|ordered|shared|write|rw] [--dump DIR] "
          "[--reps N]",
          &rank, &size);
    B = opt_ll(argc, argv, "--block", 65536);
    T = opt_ll(argc, argv, "--transfer", 4096);
    S = opt_ll(argc, argv, "--segments", 4);
    int reps = (int)opt_ll(argc, argv, "--reps", 1);
    const char *mode = opt(argc, argv, "--mode", "at");
    if (!B || !T || !S || B % T || (B / T) % 2 || B > (1 << 30))
        die("%s", "--block must be an even multiple of --transfer (at most 1 GiB)");
    int writing = !strcmp(mode, "write"), rw = !strcmp(mode, "rw");
    int amode = writing ? MPI_MODE_RDWR | MPI_MODE_CREATE : rw ? MPI_MODE_RDWR : MPI_MODE_RDONLY;
    MPI_File fh = open_or_die(MPI_COMM_WORLD, argv[1], amode);
    unsigned char *buf = malloc((size_t)(strcmp(mode, "view") ? B : S * B));
    report_t rep;
    report_open(&rep, argc, argv, rank);
    for (int k = 0; k < reps; k++) {
        if (!strcmp(mode, "view"))
            read_view(fh, buf, &rep);
        else if (writing)
            write_blocks(fh, buf, &rep);
        else if (rw)
            read_write_blocks(fh, buf, &rep);
        else
            read_blocks(fh, mode, buf, &rep);
    }
    report_close(&rep, rank, size);
    free(buf);
    MPI_File_close(&fh);
    MPI_Finalize();
    return 0;
}
