/*
 * trace.c — MPIIO records. With PATIO_TRACE_DIR set and libpatio_trace.so (the POSIX
 * tracer) preloaded, each MPI-IO read or write is recorded as one record per
 * contiguous file extent (after the file view is applied) in the tracer's raw capture,
 * layer MPIIO (docs/FORMATS.md, "Raw capture"), through the tracer's exported
 * patio_trace_record_external.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>

#include "mpiio.h"

typedef int record_fn(const char *path, int op, uint64_t offset, uint64_t length, uint64_t t0,
                      uint64_t t1, int call);
static record_fn *record;

int trace_available(void)
{
    const char *dir = getenv("PATIO_TRACE_DIR");
    if (!dir || !*dir)
        return 0;
    if (!record)
        record = (record_fn *)dlsym(RTLD_DEFAULT, "patio_trace_record_external");
    return record != NULL;
}

void trace_extents(pfile_t *f, int op, int call, const extents_t *e, uint64_t bytes, uint64_t t0,
                   uint64_t t1)
{
    if (!f->trace || !record)
        return;
    for (size_t i = 0; i < e->n && bytes; i++) {
        uint64_t len = e->v[2 * i + 1] < bytes ? e->v[2 * i + 1] : bytes;
        record(f->path, op, e->v[2 * i], len, t0, t1, call);
        bytes -= len;
    }
}
