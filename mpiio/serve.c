/*
 * serve.c — reads of registered reorganized files, through libpatio_reorg.so.
 *
 * At MPI_File_open of a file opened read-only or read-write (not write-only, not for
 * appending) the layer asks libpatio_reorg.so whether the file is registered and
 * current (patio_reorg_open), and the ranks of the file's communicator agree
 * (interpose.c, one allreduce): either every rank serves the file or none does, so a
 * collective read never has some ranks inside MPI and others not. Writes go to the
 * original (io.c says who reads the original after one); its new version makes the
 * container stale (patio's file-version rule) for the next open.
 *
 * libpatio_reorg.so is loaded with dlopen from $PATIO_REORG_LIB, or else from the
 * directory libpatio_mpiio.so itself was loaded from. Missing → one warning, nothing is
 * served.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mpiio.h"

static const char *const R_NAMES[] = {"patio_reorg_abi_version", "patio_reorg_open",
                                      "patio_reorg_read", "patio_reorg_size",
                                      "patio_reorg_stats", "patio_reorg_close",
                                      "patio_reorg_read_paced", NULL};
/* libpatio_reorg.so's functions, in R_NAMES order. */
static union {
    void *fn[7];
    struct {
        __typeof__(patio_reorg_abi_version) *abi;
        __typeof__(patio_reorg_open) *open;
        __typeof__(patio_reorg_read) *read;
        __typeof__(patio_reorg_size) *size;
        __typeof__(patio_reorg_stats) *stats;
        __typeof__(patio_reorg_close) *close;
        __typeof__(patio_reorg_read_paced) *read_paced;
    };
} R;

static int load_reorg(void)
{
    static int state;
    return mpiio_load_library("libpatio_reorg.so", "PATIO_REORG_LIB", R_NAMES, R.fn,
                              PATIO_REORG_ABI_VERSION, "reorganized files are not served", &state);
}

/* ROMIO-style file-system prefixes ("ufs:", "nfs:", "lustre:"…) name the same file. */
static const char *strip_prefix(const char *name)
{
    const char *colon = strchr(name, ':');
    if (colon && colon - name > 1 && strchr(name, '/') > colon)
        return colon + 1;
    return name;
}

/* `msg` without a leading "<name>: " (the warning names the file first). */
static const char *reason(const char *name, const char *msg)
{
    size_t n = strlen(name);
    return strncmp(msg, name, n) == 0 && msg[n] == ':' && msg[n + 1] == ' ' ? msg + n + 2 : msg;
}

PatioReorgFile *serve_try(const char *name, int amode)
{
    if (amode & (MPI_MODE_WRONLY | MPI_MODE_APPEND))
        return NULL; /* nothing to read, or pointers that start at the end: MPI's */
    PatioReorgFile *h = NULL;
    if (load_reorg()) {
        char msg[512] = "";
        int r = R.open(strip_prefix(name), &h, msg, sizeof msg);
        if (r == PATIO_REORG_BYPASSED || r == PATIO_REORG_ERROR)
            mpiio_warn("%s: %s; reading the original", name, reason(name, msg));
        if (r != PATIO_REORG_SERVED)
            h = NULL;
    }
    return h;
}

int serve_refuses_write(const char *name, int amode)
{
    const char *writes = getenv("PATIO_MPIIO_WRITES");
    if (!(amode & (MPI_MODE_WRONLY | MPI_MODE_RDWR)) || !writes || strcmp(writes, "refuse") ||
        !load_reorg())
        return 0;
    PatioReorgFile *h = NULL;
    char msg[512] = "";
    if (R.open(strip_prefix(name), &h, msg, sizeof msg) != PATIO_REORG_SERVED)
        return 0;
    R.close(h);
    mpiio_warn("%s: opened for writing while a current reorganized container is registered "
               "for it; refused (PATIO_MPIIO_WRITES=refuse)", name);
    return 1;
}

void serve_release(PatioReorgFile *h)
{
    if (h)
        R.close(h);
}

void serve_close(pfile_t *f)
{
    if (f->served) {
        PatioReorgStats s;
        R.stats(f->served, &s);
        f->physical_reads = s.physical_reads;
        R.close(f->served);
        f->served = NULL;
    }
}

void serve_stop(pfile_t *f)
{
    prefetch_close(f);
    serve_close(f);
}

int serve_extents(pfile_t *f, const uint64_t *v, size_t n, void *dest, uint64_t *got, char *msg,
                  size_t msg_len)
{
    return R.read(f->served, v, n, dest, got, msg, msg_len);
}

uint64_t serve_size(pfile_t *f) { return R.size(f->served); }

void status_set_bytes(MPI_Status *st, uint64_t bytes)
{
    if (st == MPI_STATUS_IGNORE)
        return;
    st->MPI_ERROR = MPI_SUCCESS;
    P(Status_set_elements_x)(st, H.byte, (MPI_Count)bytes);
    P(Status_set_cancelled)(st, 0);
}

static int greq_query(void *extra, MPI_Status *st)
{
    status_set_bytes(st, *(uint64_t *)extra);
    return MPI_SUCCESS;
}

static int greq_free(void *extra)
{
    free(extra);
    return MPI_SUCCESS;
}

static int greq_cancel(void *extra, int complete)
{
    (void)extra;
    (void)complete;
    return MPI_SUCCESS;
}

int completed_request(uint64_t bytes, MPI_Request *req)
{
    uint64_t *extra = malloc(sizeof *extra);
    if (!extra)
        return MPI_ERR_NO_MEM;
    *extra = bytes;
    int rc = P(Grequest_start)(greq_query, greq_free, greq_cancel, extra, req);
    if (rc != MPI_SUCCESS) {
        free(extra);
        return rc;
    }
    return P(Grequest_complete)(*req);
}

int serve_read(pfile_t *f, uint64_t b, void *buf, int count, MPI_Datatype dt, uint64_t *bytes,
               extents_t *ext, turns_t *turns)
{
    char msg[512] = "";
    flat_t mem;
    memset(&mem, 0, sizeof mem);
    int named = 0, ni, na, nd, comb;
    if (P(Type_get_envelope)(dt, &ni, &na, &nd, &comb) == MPI_SUCCESS && comb == MPI_COMBINER_NAMED)
        named = 1;
    int64_t size;
    if (named) {
        int s;
        if (P(Type_size)(dt, &s) != MPI_SUCCESS)
            return -1;
        size = s;
    } else if (flat_type(dt, &mem)) {
        return -1;
    } else {
        size = mem.size;
    }
    uint64_t want = (uint64_t)size * (uint64_t)(count > 0 ? count : 0);
    if (view_extents(&f->view, b, want, ext)) {
        flat_free(&mem);
        return -1;
    }
    int contiguous = named || flat_contiguous(&mem, count);
    void *dest = named ? buf : (char *)buf + (mem.n ? mem.runs[0].off : 0);
    void *scratch = NULL;
    if (!contiguous && !(dest = scratch = malloc(want ? want : 1))) {
        flat_free(&mem);
        return -1;
    }
    uint64_t got = 0;
    int rc;
    if (f->prefetch || f->policy) {
        rc = prefetch_read(f, ext, dest, &got, msg, sizeof msg);
    } else if (turns) {
        PatioReorgPacer pacer = turns_pacer(turns);
        rc = R.read_paced(f->served, ext->v, ext->n, dest, &got, &pacer, msg, sizeof msg);
        f->turn_calls += rc == 0;
    } else {
        rc = R.read(f->served, ext->v, ext->n, dest, &got, msg, sizeof msg);
    }
    if (rc == 0 && scratch)
        flat_scatter(&mem, scratch, got, buf);
    free(scratch);
    flat_free(&mem);
    if (rc != 0) {
        mpiio_warn("%s: %s; reading the original", f->name, reason(f->name, msg));
        prefetch_close(f);
        serve_close(f);
        return -1;
    }
    *bytes = got;
    f->served_calls++;
    f->served_bytes += got;
    return 0;
}

void stats_write(pfile_t *f)
{
    const char *dir = getenv("PATIO_MPIIO_STATS");
    if (!dir || !*dir)
        return;
    if (f->served) {
        PatioReorgStats s;
        R.stats(f->served, &s);
        f->physical_reads = s.physical_reads;
    }
    int rank = mpiio_world_rank();
    char path[PATH_MAX + 64], text[PATH_MAX + 512], esc[2 * PATH_MAX];
    size_t o = 0;
    for (const char *c = f->path; *c && o + 7 < sizeof esc; c++) {
        if (*c == '"' || *c == '\\')
            esc[o++] = '\\';
        if ((unsigned char)*c < 0x20) {
            o += (size_t)snprintf(esc + o, sizeof esc - o, "\\u%04x", *c);
            continue;
        }
        esc[o++] = *c;
    }
    esc[o] = 0;
    static int seq;
    int n = __atomic_fetch_add(&seq, 1, __ATOMIC_RELAXED);
    snprintf(path, sizeof path, "%s/mpiio.%d.%d.%d.json", dir, rank, (int)getpid(), n);
    int len = snprintf(text, sizeof text,
                       "{\"file\": \"%s\", \"rank\": %d, \"served_calls\": %llu, "
                       "\"served_bytes\": %llu, \"physical_reads\": %llu, \"passed_calls\": %llu, "
                       "\"prefetched_bytes\": %llu, \"prefetch_used_bytes\": %llu, "
                       "\"turn_calls\": %llu}\n",
                       esc, rank, (unsigned long long)f->served_calls,
                       (unsigned long long)f->served_bytes, (unsigned long long)f->physical_reads,
                       (unsigned long long)f->passed_calls, (unsigned long long)f->prefetched_bytes,
                       (unsigned long long)f->prefetch_used_bytes, (unsigned long long)f->turn_calls);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0 || write(fd, text, (size_t)len) != len)
        mpiio_warn("cannot write %s: %s", path, strerror(errno));
    if (fd >= 0)
        close(fd);
}
