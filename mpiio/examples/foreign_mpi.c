/*
 * foreign_mpi — a process whose "MPI" is not Open MPI: it defines PMPI_File_open,
 * PMPI_File_read_at, PMPI_File_close and PMPI_Get_library_version itself (reporting
 * another library) and calls MPI_File_open, MPI_File_read_at and MPI_File_close as
 * libpatio_mpiio.so (which must be preloaded) defines them. The layer must warn once
 * and hand every call, arguments untouched, to these functions. Prints "passed through"
 * and exits 0 when it did; exits 1 otherwise.
 *
 * Built against Open MPI's mpi.h for the types only; not linked with any MPI.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <mpi.h>
#include <stdio.h>
#include <string.h>

static int opened, read_at, closed;
static MPI_File the_file = (MPI_File)0x1234560;

int PMPI_Get_library_version(char *version, int *len)
{
    *len = snprintf(version, MPI_MAX_LIBRARY_VERSION_STRING, "Another MPI Version: 9.9");
    return 0;
}

int PMPI_File_open(MPI_Comm comm, const char *name, int amode, MPI_Info info, MPI_File *fh)
{
    opened = comm == (MPI_Comm)0x10 && !strcmp(name, "data.bin") && amode == MPI_MODE_RDONLY &&
             info == (MPI_Info)0x20;
    *fh = the_file;
    return 0;
}

int PMPI_File_read_at(MPI_File fh, MPI_Offset off, void *buf, int count, MPI_Datatype dt,
                      MPI_Status *st)
{
    read_at = fh == the_file && off == 4096 && count == 7 && dt == (MPI_Datatype)0x30 &&
              st == (MPI_Status *)0x40;
    memset(buf, 'x', 7);
    return 0;
}

int PMPI_File_close(MPI_File *fh)
{
    closed = *fh == the_file;
    return 0;
}

int main(void)
{
    __typeof__(MPI_File_open) *op = (__typeof__(MPI_File_open) *)dlsym(RTLD_DEFAULT, "MPI_File_open");
    __typeof__(MPI_File_read_at) *rd =
        (__typeof__(MPI_File_read_at) *)dlsym(RTLD_DEFAULT, "MPI_File_read_at");
    __typeof__(MPI_File_close) *cl = (__typeof__(MPI_File_close) *)dlsym(RTLD_DEFAULT, "MPI_File_close");
    if (!op || !rd || !cl) {
        fprintf(stderr, "foreign_mpi: libpatio_mpiio.so is not preloaded\n");
        return 1;
    }
    for (int round = 0; round < 2; round++) { /* the layer warns once, not per file */
        MPI_File fh;
        char buf[8] = {0};
        opened = read_at = closed = 0;
        int rc = op((MPI_Comm)0x10, "data.bin", MPI_MODE_RDONLY, (MPI_Info)0x20, &fh);
        rc |= rd(fh, 4096, buf, 7, (MPI_Datatype)0x30, (MPI_Status *)0x40);
        rc |= cl(&fh);
        if (rc || !opened || !read_at || !closed || strcmp(buf, "xxxxxxx") != 0) {
            fprintf(stderr, "foreign_mpi: calls were not passed through (open %d read %d close %d)\n",
                    opened, read_at, closed);
            return 1;
        }
    }
    printf("passed through\n");
    return 0;
}
