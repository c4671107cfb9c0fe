/*
 * files.c — the files libpatio_mpiio.so watches (traced, served or counted), keyed by
 * their MPI_File handle. Lookups are lock-free (every read call makes one); adding and
 * removing, at open and close, take a mutex. A file's own state (its pointer, its
 * counters) is not locked: MPI leaves concurrent calls on one file handle from several
 * threads without defined pointer semantics, and the layer keeps to one caller at a
 * time per handle.
 */
#include <stdlib.h>

#include "mpiio.h"

#define SLOTS 4096
#define TOMBSTONE ((pfile_t *)1)

int mpiio_watching;
static pfile_t *slots[SLOTS];
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static size_t slot_of(MPI_File fh)
{
    uintptr_t k = (uintptr_t)fh;
    return (size_t)((k >> 4) * 0x9E3779B97F4A7C15ull >> 52) & (SLOTS - 1);
}

pfile_t *files_find(MPI_File fh)
{
    for (size_t i = slot_of(fh), probes = 0; probes < SLOTS; i = (i + 1) & (SLOTS - 1), probes++) {
        pfile_t *f = __atomic_load_n(&slots[i], __ATOMIC_ACQUIRE);
        if (!f)
            return NULL;
        if (f != TOMBSTONE && f->fh == fh)
            return f;
    }
    return NULL;
}

int files_add(pfile_t *f)
{
    int ok = -1;
    pthread_mutex_lock(&lock);
    for (size_t i = slot_of(f->fh), probes = 0; probes < SLOTS;
         i = (i + 1) & (SLOTS - 1), probes++) {
        pfile_t *s = slots[i];
        if (!s || s == TOMBSTONE) {
            __atomic_store_n(&slots[i], f, __ATOMIC_RELEASE);
            __atomic_add_fetch(&mpiio_watching, 1, __ATOMIC_RELEASE);
            ok = 0;
            break;
        }
    }
    pthread_mutex_unlock(&lock);
    return ok;
}

void files_remove(pfile_t *f)
{
    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < SLOTS; i++)
        if (slots[i] == f) {
            /* a slot before an empty one ends every probe through it: empty it too, and
             * the tombstones before it */
            int last = !slots[(i + 1) & (SLOTS - 1)];
            __atomic_store_n(&slots[i], last ? NULL : TOMBSTONE, __ATOMIC_RELEASE);
            for (size_t j = (i - 1) & (SLOTS - 1); last && slots[j] == TOMBSTONE;
                 j = (j - 1) & (SLOTS - 1))
                __atomic_store_n(&slots[j], NULL, __ATOMIC_RELEASE);
            __atomic_sub_fetch(&mpiio_watching, 1, __ATOMIC_RELEASE);
        }
    pthread_mutex_unlock(&lock);
}

void files_each(void (*fn)(pfile_t *))
{
    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < SLOTS; i++)
        if (slots[i] && slots[i] != TOMBSTONE)
            fn(slots[i]);
    pthread_mutex_unlock(&lock);
}
