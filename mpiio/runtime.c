/*
 * runtime.c — how libpatio_mpiio.so finds MPI at run time: PMPI entry points and Open
 * MPI's predefined handles through dlsym, the check that the process runs the MPI the
 * library was built for, and the layer's one-line warnings.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "mpiio.h"

struct mpiio_handles H;
__thread int mpiio_depth;

void *mpiio_resolve(const char *name)
{
    void *p = dlsym(RTLD_DEFAULT, name);
    if (!p) {
        /* libmpi loaded RTLD_LOCAL (a Python extension's dependency): find it by name. */
        static const char *libs[] = {"libmpi.so.40", "libmpi.so", NULL};
        for (int i = 0; !p && libs[i]; i++) {
            void *h = dlopen(libs[i], RTLD_LAZY | RTLD_NOLOAD);
            if (h)
                p = dlsym(h, name);
        }
    }
    return p;
}

static void *open_library(const char *name, const char *env, char *path, size_t path_len)
{
    const char *given = getenv(env);
    Dl_info info;
    if (given && *given) {
        snprintf(path, path_len, "%s", given);
    } else if (dladdr((void *)open_library, &info) && info.dli_fname &&
               strrchr(info.dli_fname, '/')) {
        int dir = (int)(strrchr(info.dli_fname, '/') - info.dli_fname);
        snprintf(path, path_len, "%.*s/%s", dir, info.dli_fname, name);
    } else {
        snprintf(path, path_len, "%s", name);
    }
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h)
        snprintf(path, path_len, "%s", dlerror());
    return h;
}

int mpiio_load_library(const char *name, const char *env, const char *const *names, void **fns,
                       uint32_t abi, const char *without, int *state)
{
    static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
    pthread_mutex_lock(&m);
    if (!*state) {
        char path[PATH_MAX];
        void *h = open_library(name, env, path, sizeof path);
        *state = 2;
        size_t n = 0, found = 0;
        for (; h && names[n]; n++)
            found += (fns[n] = dlsym(h, names[n])) != NULL;
        if (!h)
            mpiio_warn("%s; %s (set %s)", path, without, env);
        else if (found < n)
            mpiio_warn("%s lacks the functions of its C ABI; %s", path, without);
        else if (((uint32_t (*)(void))fns[0])() != abi)
            mpiio_warn("%s has C ABI version %u, not %u; %s", path,
                       ((uint32_t (*)(void))fns[0])(), abi, without);
        else
            *state = 1;
    }
    pthread_mutex_unlock(&m);
    return *state == 1;
}

void mpiio_warn(const char *fmt, ...)
{
    char line[1024];
    int n = snprintf(line, sizeof line, "patio: MPI-IO: ");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
    va_end(ap);
    size_t len = strnlen(line, sizeof line - 2);
    line[len++] = '\n';
    ssize_t w = write(2, line, len);
    (void)w;
}

uint64_t mpiio_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int check(void)
{
    void *byte = mpiio_resolve("ompi_mpi_byte"), *self = mpiio_resolve("ompi_mpi_comm_self");
    void *i = mpiio_resolve("ompi_mpi_int"), *ll = mpiio_resolve("ompi_mpi_long_long_int");
    void *mn = mpiio_resolve("ompi_mpi_op_min"), *sm = mpiio_resolve("ompi_mpi_op_sum");
    void *mx = mpiio_resolve("ompi_mpi_op_max"), *nop = mpiio_resolve("ompi_mpi_op_no_op");
    void *rep = mpiio_resolve("ompi_mpi_op_replace"), *inull = mpiio_resolve("ompi_mpi_info_null");
    void *eret = mpiio_resolve("ompi_mpi_errors_return");
    char version[MPI_MAX_LIBRARY_VERSION_STRING] = "an unknown MPI library";
    int len = 0;
    __typeof__(PMPI_Get_library_version) *getv =
        (__typeof__(PMPI_Get_library_version) *)mpiio_resolve("PMPI_Get_library_version");
    if (getv)
        getv(version, &len);
    char expect[32];
    snprintf(expect, sizeof expect, "Open MPI v%d.", OMPI_MAJOR_VERSION);
    version[strcspn(version, "\n,")] = 0;
    if (strncmp(version, expect, strlen(expect)) != 0) {
        mpiio_warn("this process runs %s, not the Open MPI %d the library was built for; "
                   "every MPI-IO call passes through untouched",
                   version, OMPI_MAJOR_VERSION);
        return 0;
    }
    if (!byte || !self || !i || !ll || !mn || !sm || !mx || !nop || !rep || !inull || !eret) {
        mpiio_warn("%s lacks Open MPI's predefined handles (ompi_mpi_byte, …); every MPI-IO "
                   "call passes through untouched", version);
        return 0;
    }
    H.byte = (MPI_Datatype)byte;
    H.self = (MPI_Comm)self;
    H.int_ = (MPI_Datatype)i;
    H.long_long = (MPI_Datatype)ll;
    H.min = (MPI_Op)mn;
    H.sum = (MPI_Op)sm;
    H.max = (MPI_Op)mx;
    H.no_op = (MPI_Op)nop;
    H.replace = (MPI_Op)rep;
    H.info_null = (MPI_Info)inull;
    H.errors_return = (MPI_Errhandler)eret;
    return 1;
}

int mpiio_ready(void)
{
    static int state; /* 0 unknown, 1 ready, 2 not */
    int s = __atomic_load_n(&state, __ATOMIC_ACQUIRE);
    if (UNLIKELY(s == 0)) {
        static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
        pthread_mutex_lock(&m);
        s = state ? state : (check() ? 1 : 2);
        __atomic_store_n(&state, s, __ATOMIC_RELEASE);
        pthread_mutex_unlock(&m);
    }
    return s == 1;
}

int mpiio_world_rank(void)
{
    static int rank = -2;
    if (rank == -2) {
        void *world = mpiio_resolve("ompi_mpi_comm_world");
        int r = -1;
        if (!world || P(Comm_rank)((MPI_Comm)world, &r) != MPI_SUCCESS)
            r = -1;
        rank = r;
    }
    return rank;
}
