/*
 * fortran.c — the layer for Fortran programs.
 *
 * Open MPI's Fortran bindings call PMPI_* directly, so a C-level interposer alone never
 * sees a Fortran program's MPI-IO. The layer therefore also defines the bindings' entry
 * points for the calls it handles: the `mpif.h` / `use mpi` names in every mangling
 * Open MPI exports (mpi_file_read_at_, mpi_file_read_at__, mpi_file_read_at,
 * MPI_FILE_READ_AT) and ompi_file_read_at_f, the common implementation the `use
 * mpi_f08` bindings call. Each converts its Fortran handles (MPI_*_f2c), strings
 * (blank-padded, with a hidden length) and sentinels (MPI_STATUS_IGNORE, MPI_BOTTOM) as
 * Open MPI's own bindings do, and calls the layer's C entry point, so a Fortran call is
 * traced, served and counted exactly as the same C call.
 */
#include <stdlib.h>
#include <string.h>

#include "mpiio.h"

typedef MPI_Fint F;

/* Open MPI's Fortran sentinels (gfortran's mangling: the only one this Open MPI has). */
static void *sentinel(const char *name, void **cache)
{
    void *p = __atomic_load_n(cache, __ATOMIC_RELAXED);
    if (!p) {
        p = mpiio_resolve(name);
        __atomic_store_n(cache, p ? p : (void *)-1, __ATOMIC_RELAXED);
    }
    return p == (void *)-1 ? NULL : p;
}

static int status_ignored(F *status)
{
    static void *ignore;
    return (void *)status == sentinel("mpi_fortran_status_ignore_", &ignore);
}

static void *bottom(void *buf)
{
    static void *b;
    return buf == sentinel("mpi_fortran_bottom_", &b) ? MPI_BOTTOM : buf;
}

static MPI_File file_of(const F *fh) { return P(File_f2c)(*fh); }
static MPI_Datatype type_of(const F *t) { return P(Type_f2c)(*t); }

static void finish(int rc, F *ierr) {
    if (ierr)
        *ierr = (F)rc;
}

static void status_out(int rc, int ignored, MPI_Status *st, F *status)
{
    if (rc == MPI_SUCCESS && !ignored)
        P(Status_c2f)(st, status);
}

/* A blank-padded Fortran string of `len` characters as a C string (malloc'd), or NULL. */
static char *c_string(const char *s, int len)
{
    while (len > 0 && s[len - 1] == ' ')
        len--;
    while (len > 0 && *s == ' ') {
        s++;
        len--;
    }
    char *out = malloc((size_t)(len > 0 ? len : 0) + 1);
    if (out) {
        memcpy(out, s, (size_t)(len > 0 ? len : 0));
        out[len > 0 ? len : 0] = 0;
    }
    return out;
}

/* Every name a Fortran call of MPI_<U> may reach the library by. */
#define NAMES(l, U, fn)                                                                \
    EXPORT __typeof__(fn) ompi_##l##_f __attribute__((alias(#fn)));                    \
    EXPORT __typeof__(fn) mpi_##l##_ __attribute__((alias(#fn)));                      \
    EXPORT __typeof__(fn) mpi_##l##__ __attribute__((alias(#fn)));                     \
    EXPORT __typeof__(fn) mpi_##l __attribute__((alias(#fn)));                         \
    EXPORT __typeof__(fn) MPI_##U __attribute__((alias(#fn)));

/* ---- open, close, views, pointers, consistency ---- */

void f_file_open(F *comm, char *name, F *amode, F *info, F *fh, F *ierr, int name_len);
void f_file_open(F *comm, char *name, F *amode, F *info, F *fh, F *ierr, int name_len)
{
    char *path = c_string(name, name_len);
    MPI_File c_fh = NULL;
    int rc = path ? MPI_File_open(P(Comm_f2c)(*comm), path, (int)*amode, P(Info_f2c)(*info), &c_fh)
                  : MPI_ERR_NO_MEM;
    free(path);
    if (rc == MPI_SUCCESS)
        *fh = P(File_c2f)(c_fh);
    finish(rc, ierr);
}
NAMES(file_open, FILE_OPEN, f_file_open)

void f_file_close(F *fh, F *ierr);
void f_file_close(F *fh, F *ierr)
{
    MPI_File c_fh = file_of(fh);
    int rc = MPI_File_close(&c_fh);
    if (rc == MPI_SUCCESS)
        *fh = P(File_c2f)(c_fh);
    finish(rc, ierr);
}
NAMES(file_close, FILE_CLOSE, f_file_close)

void f_file_set_view(F *fh, MPI_Offset *disp, F *etype, F *filetype, char *datarep, F *info,
                     F *ierr, int datarep_len);
void f_file_set_view(F *fh, MPI_Offset *disp, F *etype, F *filetype, char *datarep, F *info,
                     F *ierr, int datarep_len)
{
    char *rep = c_string(datarep, datarep_len);
    int rc = rep ? MPI_File_set_view(file_of(fh), *disp, type_of(etype), type_of(filetype), rep,
                                     P(Info_f2c)(*info))
                 : MPI_ERR_NO_MEM;
    free(rep);
    finish(rc, ierr);
}
NAMES(file_set_view, FILE_SET_VIEW, f_file_set_view)

#define F_OFFSET_IN(l, U, c)                                                             \
    void f_##l(F *fh, MPI_Offset *off, F *whence, F *ierr);                              \
    void f_##l(F *fh, MPI_Offset *off, F *whence, F *ierr)                               \
    {                                                                                    \
        finish(c(file_of(fh), *off, (int)*whence), ierr);                                \
    }                                                                                    \
    NAMES(l, U, f_##l)
F_OFFSET_IN(file_seek, FILE_SEEK, MPI_File_seek)
F_OFFSET_IN(file_seek_shared, FILE_SEEK_SHARED, MPI_File_seek_shared)

#define F_OFFSET_OUT(l, U, c)                                                            \
    void f_##l(F *fh, MPI_Offset *off, F *ierr);                                         \
    void f_##l(F *fh, MPI_Offset *off, F *ierr) { finish(c(file_of(fh), off), ierr); }   \
    NAMES(l, U, f_##l)
F_OFFSET_OUT(file_get_position, FILE_GET_POSITION, MPI_File_get_position)
F_OFFSET_OUT(file_get_position_shared, FILE_GET_POSITION_SHARED, MPI_File_get_position_shared)

#define F_SIZE(l, U, c)                                                                  \
    void f_##l(F *fh, MPI_Offset *size, F *ierr);                                        \
    void f_##l(F *fh, MPI_Offset *size, F *ierr) { finish(c(file_of(fh), *size), ierr); } \
    NAMES(l, U, f_##l)
F_SIZE(file_set_size, FILE_SET_SIZE, MPI_File_set_size)
F_SIZE(file_preallocate, FILE_PREALLOCATE, MPI_File_preallocate)

void f_file_sync(F *fh, F *ierr);
void f_file_sync(F *fh, F *ierr) { finish(MPI_File_sync(file_of(fh)), ierr); }
NAMES(file_sync, FILE_SYNC, f_file_sync)

void f_file_set_atomicity(F *fh, F *flag, F *ierr);
void f_file_set_atomicity(F *fh, F *flag, F *ierr)
{
    finish(MPI_File_set_atomicity(file_of(fh), *flag != 0), ierr); /* LOGICAL: 0 is false */
}
NAMES(file_set_atomicity, FILE_SET_ATOMICITY, f_file_set_atomicity)

void f_finalize(F *ierr);
void f_finalize(F *ierr) { finish(MPI_Finalize(), ierr); }
NAMES(finalize, FINALIZE, f_finalize)

/* ---- the read and write families ---- */

#define F_AT(l, U, c, B)                                                                    \
    void f_##l(F *fh, MPI_Offset *off, B buf, F *count, F *dt, F *status, F *ierr);       \
    void f_##l(F *fh, MPI_Offset *off, B buf, F *count, F *dt, F *status, F *ierr)        \
    {                                                                                    \
        MPI_Status st;                                                                   \
        int ignored = status_ignored(status);                                            \
        int rc = c(file_of(fh), *off, bottom((void *)buf), (int)*count, type_of(dt), \
                         ignored ? MPI_STATUS_IGNORE : &st);                             \
        status_out(rc, ignored, &st, status);                                            \
        finish(rc, ierr);                                                                \
    }                                                                                    \
    NAMES(l, U, f_##l)
#define F_PTR(l, U, c, B)                                                                   \
    void f_##l(F *fh, B buf, F *count, F *dt, F *status, F *ierr);                       \
    void f_##l(F *fh, B buf, F *count, F *dt, F *status, F *ierr)                        \
    {                                                                                    \
        MPI_Status st;                                                                   \
        int ignored = status_ignored(status);                                            \
        int rc = c(file_of(fh), bottom((void *)buf), (int)*count, type_of(dt),     \
                         ignored ? MPI_STATUS_IGNORE : &st);                             \
        status_out(rc, ignored, &st, status);                                            \
        finish(rc, ierr);                                                                \
    }                                                                                    \
    NAMES(l, U, f_##l)
#define F_IAT(l, U, c, B)                                                                   \
    void f_##l(F *fh, MPI_Offset *off, B buf, F *count, F *dt, F *request, F *ierr);      \
    void f_##l(F *fh, MPI_Offset *off, B buf, F *count, F *dt, F *request, F *ierr)       \
    {                                                                                    \
        MPI_Request r;                                                                   \
        int rc = c(file_of(fh), *off, bottom((void *)buf), (int)*count, type_of(dt), \
                         &r);                                                            \
        if (rc == MPI_SUCCESS)                                                           \
            *request = P(Request_c2f)(r);                                                \
        finish(rc, ierr);                                                                \
    }                                                                                    \
    NAMES(l, U, f_##l)
#define F_IPTR(l, U, c, B)                                                                  \
    void f_##l(F *fh, B buf, F *count, F *dt, F *request, F *ierr);                      \
    void f_##l(F *fh, B buf, F *count, F *dt, F *request, F *ierr)                       \
    {                                                                                    \
        MPI_Request r;                                                                   \
        int rc = c(file_of(fh), bottom((void *)buf), (int)*count, type_of(dt), &r); \
        if (rc == MPI_SUCCESS)                                                           \
            *request = P(Request_c2f)(r);                                                \
        finish(rc, ierr);                                                                \
    }                                                                                    \
    NAMES(l, U, f_##l)
#define F_BEGIN_AT(l, U, c, B)                                                              \
    void f_##l(F *fh, MPI_Offset *off, B buf, F *count, F *dt, F *ierr);                 \
    void f_##l(F *fh, MPI_Offset *off, B buf, F *count, F *dt, F *ierr)                  \
    {                                                                                    \
        finish(c(file_of(fh), *off, bottom((void *)buf), (int)*count, type_of(dt)), \
               ierr);                                                                    \
    }                                                                                    \
    NAMES(l, U, f_##l)
#define F_BEGIN_PTR(l, U, c, B)                                                             \
    void f_##l(F *fh, B buf, F *count, F *dt, F *ierr);                                  \
    void f_##l(F *fh, B buf, F *count, F *dt, F *ierr)                                   \
    {                                                                                    \
        finish(c(file_of(fh), bottom((void *)buf), (int)*count, type_of(dt)), ierr); \
    }                                                                                    \
    NAMES(l, U, f_##l)
#define F_END(l, U, c, B)                                                                   \
    void f_##l(F *fh, B buf, F *status, F *ierr);                                        \
    void f_##l(F *fh, B buf, F *status, F *ierr)                                         \
    {                                                                                    \
        MPI_Status st;                                                                   \
        int ignored = status_ignored(status);                                            \
        int rc = c(file_of(fh), bottom((void *)buf), ignored ? MPI_STATUS_IGNORE : &st); \
        status_out(rc, ignored, &st, status);                                            \
        finish(rc, ierr);                                                                \
    }                                                                                    \
    NAMES(l, U, f_##l)

F_AT(file_read_at, FILE_READ_AT, MPI_File_read_at, void *)
F_AT(file_write_at, FILE_WRITE_AT, MPI_File_write_at, const void *)
F_AT(file_read_at_all, FILE_READ_AT_ALL, MPI_File_read_at_all, void *)
F_AT(file_write_at_all, FILE_WRITE_AT_ALL, MPI_File_write_at_all, const void *)
F_PTR(file_read, FILE_READ, MPI_File_read, void *)
F_PTR(file_write, FILE_WRITE, MPI_File_write, const void *)
F_PTR(file_read_all, FILE_READ_ALL, MPI_File_read_all, void *)
F_PTR(file_write_all, FILE_WRITE_ALL, MPI_File_write_all, const void *)
F_PTR(file_read_shared, FILE_READ_SHARED, MPI_File_read_shared, void *)
F_PTR(file_write_shared, FILE_WRITE_SHARED, MPI_File_write_shared, const void *)
F_PTR(file_read_ordered, FILE_READ_ORDERED, MPI_File_read_ordered, void *)
F_PTR(file_write_ordered, FILE_WRITE_ORDERED, MPI_File_write_ordered, const void *)
F_IAT(file_iread_at, FILE_IREAD_AT, MPI_File_iread_at, void *)
F_IAT(file_iwrite_at, FILE_IWRITE_AT, MPI_File_iwrite_at, const void *)
F_IAT(file_iread_at_all, FILE_IREAD_AT_ALL, MPI_File_iread_at_all, void *)
F_IAT(file_iwrite_at_all, FILE_IWRITE_AT_ALL, MPI_File_iwrite_at_all, const void *)
F_IPTR(file_iread, FILE_IREAD, MPI_File_iread, void *)
F_IPTR(file_iwrite, FILE_IWRITE, MPI_File_iwrite, const void *)
F_IPTR(file_iread_all, FILE_IREAD_ALL, MPI_File_iread_all, void *)
F_IPTR(file_iwrite_all, FILE_IWRITE_ALL, MPI_File_iwrite_all, const void *)
F_IPTR(file_iread_shared, FILE_IREAD_SHARED, MPI_File_iread_shared, void *)
F_IPTR(file_iwrite_shared, FILE_IWRITE_SHARED, MPI_File_iwrite_shared, const void *)
F_BEGIN_AT(file_read_at_all_begin, FILE_READ_AT_ALL_BEGIN, MPI_File_read_at_all_begin, void *)
F_BEGIN_AT(file_write_at_all_begin, FILE_WRITE_AT_ALL_BEGIN, MPI_File_write_at_all_begin, const void *)
F_BEGIN_PTR(file_read_all_begin, FILE_READ_ALL_BEGIN, MPI_File_read_all_begin, void *)
F_BEGIN_PTR(file_write_all_begin, FILE_WRITE_ALL_BEGIN, MPI_File_write_all_begin, const void *)
F_BEGIN_PTR(file_read_ordered_begin, FILE_READ_ORDERED_BEGIN, MPI_File_read_ordered_begin, void *)
F_BEGIN_PTR(file_write_ordered_begin, FILE_WRITE_ORDERED_BEGIN, MPI_File_write_ordered_begin, const void *)
F_END(file_read_at_all_end, FILE_READ_AT_ALL_END, MPI_File_read_at_all_end, void *)
F_END(file_write_at_all_end, FILE_WRITE_AT_ALL_END, MPI_File_write_at_all_end, const void *)
F_END(file_read_all_end, FILE_READ_ALL_END, MPI_File_read_all_end, void *)
F_END(file_write_all_end, FILE_WRITE_ALL_END, MPI_File_write_all_end, const void *)
F_END(file_read_ordered_end, FILE_READ_ORDERED_END, MPI_File_read_ordered_end, void *)
F_END(file_write_ordered_end, FILE_WRITE_ORDERED_END, MPI_File_write_ordered_end, const void *)
