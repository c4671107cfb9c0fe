/*
 * output.c — the raw capture (docs/FORMATS.md, "Raw capture"): CRC32C, frames, the
 * per-process file and the flush of the record buffer; recording into that buffer, also
 * for other layers through the exported patio_trace_record_external.
 */
#include "tracer.h"

/* ---- output ---- */
#if defined(__x86_64__)
static int have_crc_hw;
#endif

void crc_init(void)
{
#if defined(__x86_64__)
    __builtin_cpu_init();
    have_crc_hw = __builtin_cpu_supports("sse4.2");
#endif
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = (c >> 1) ^ (0x82F63B78u & (0u - (c & 1)));
        G.crc_table[i] = c;
    }
}

#if defined(__x86_64__)
/* The SSE4.2 crc32 instruction computes CRC32C; used when the CPU has it. */
__attribute__((target("sse4.2"))) static uint32_t crc32c_hw(const unsigned char *p, size_t n)
{
    uint64_t c = 0xFFFFFFFFu;
    for (; n >= 8; p += 8, n -= 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        c = __builtin_ia32_crc32di(c, v);
    }
    uint32_t c32 = (uint32_t)c;
    while (n--)
        c32 = __builtin_ia32_crc32qi(c32, *p++);
    return c32 ^ 0xFFFFFFFFu;
}
#endif

static uint32_t crc32c(const unsigned char *p, size_t n)
{
#if defined(__x86_64__)
    if (have_crc_hw)
        return crc32c_hw(p, n);
#endif
    uint32_t c = 0xFFFFFFFFu;
    while (n--)
        c = G.crc_table[(c ^ *p++) & 0xFF] ^ (c >> 8);
    return c ^ 0xFFFFFFFFu;
}

static unsigned char *put16(unsigned char *p, uint16_t v)
{
    p[0] = (unsigned char)v;
    p[1] = (unsigned char)(v >> 8);
    return p + 2;
}

static unsigned char *put32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
    return p + 4;
}

static unsigned char *put64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)(v >> (8 * i));
    return p + 8;
}

static int write_all(int fd, const unsigned char *p, size_t n)
{
    while (n) {
        ssize_t w = REAL(write)(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Writes the frame whose payload is stage[8 .. end). */
static int emit_frame(int fd, unsigned char *end)
{
    size_t len = (size_t)(end - G.stage) - 8;
    put32(G.stage, (uint32_t)len);
    put32(G.stage + 4, crc32c(G.stage + 8, len));
    return write_all(fd, G.stage, len + 8);
}

/* Creates this process image's file (<dir>/<host>.<pid>.<n>.praw, the first free n)
 * with its header and process frame, and returns it open; -1 on failure. */
static int create_output(void)
{
    char *name = G.out_name;
    size_t base = strlen(G.dir), n;
    int fd = -1, made_dir = 0;
    if (base + 300 >= sizeof G.out_name)
        return -1;
    memcpy(name, G.dir, base);
    name[base++] = '/';
    n = strlen(G.host);
    memcpy(name + base, G.host, n);
    base += n;
    name[base++] = '.';
    base += put_dec(name + base, (uint64_t)G.pid);
    name[base++] = '.';
    for (int tries = 0; tries < 100000 && fd < 0; tries++, G.file_seq++) {
        n = base + put_dec(name + base, G.file_seq);
        memcpy(name + n, ".praw", 6);
        fd = REAL(open)(name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        if (fd < 0 && errno == ENOENT && !made_dir) {
            /* The directory is missing: create it (one level) and retry the name. */
            made_dir = 1;
            if (mkdir(G.dir, 0777) == 0 || errno == EEXIST) {
                tries--, G.file_seq--;
                continue;
            }
        }
        if (fd < 0 && errno != EEXIST)
            return -1;
    }
    if (fd < 0)
        return -1;
    G.have_name = 1;
    /* process frame (the 8-byte file header is written first, below) */
    unsigned char *p = G.stage + 8;
    *p++ = FRAME_PROCESS;
    *p++ = 0; /* clock: 0 = CLOCK_REALTIME */
    p = put16(p, RECORD_BYTES);
    p = put32(p, (uint32_t)G.rank);
    p = put32(p, (uint32_t)G.pid);
    p = put32(p, (uint32_t)G.ppid);
    p = put64(p, G.init_ns);
    n = strlen(G.host);
    p = put16(p, (uint16_t)n);
    memcpy(p, G.host, n);
    p += n;
    n = strlen(G.exe);
    p = put16(p, (uint16_t)n);
    memcpy(p, G.exe, n);
    p += n;
    static const unsigned char header[8] = {'P', 'R', 'A', 'W', PRAW_VERSION, 0, 0, 0};
    if (write_all(fd, header, sizeof header) != 0 ||
        emit_frame(fd, p) != 0) {
        REAL(close)(fd);
        return -1;
    }
    return fd;
}

/* Under the lock (or from a fatal signal): writes new paths and all buffered records. */
void flush_locked(void)
{
    uint32_t nrec = __atomic_load_n(&G.nrec, __ATOMIC_ACQUIRE);
    int fd = -1;
    if (nrec == 0 || G.out_failed || !G.stage)
        goto done;
    if (foreign_process())
        goto done; /* a child made without fork handlers (clone, _Fork): not its file */
    fd = G.have_name ? REAL(open)(G.out_name, O_WRONLY | O_APPEND | O_CLOEXEC)
                     : create_output();
    if (fd < 0)
        goto fail;
    while (G.paths_written < G.npaths) {
        unsigned char *p = G.stage + 8, *count;
        uint32_t k = 0;
        *p++ = FRAME_PATHS;
        count = p;
        p += 4;
        while (G.paths_written < G.npaths) {
            path_t *e = pool_at(&G.paths, G.paths_written, 0);
            if (k && (size_t)(p - G.stage) + e->len + 16 > PATHS_FRAME_LIMIT)
                break;
            p = put32(p, G.paths_written);
            p = put32(p, e->len);
            memcpy(p, e->text, e->len);
            p += e->len;
            G.paths_written++;
            k++;
        }
        put32(count, k);
        if (emit_frame(fd, p) != 0)
            goto fail;
    }
    for (uint32_t at = 0; at < nrec;) {
        uint32_t k = nrec - at < RECORDS_PER_FRAME ? nrec - at : RECORDS_PER_FRAME;
        unsigned char *p = G.stage + 8;
        *p++ = FRAME_RECORDS;
        p = put32(p, k);
        for (uint32_t i = 0; i < k; i++) {
            const rec_t *r = &G.recs[at + i];
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
            /* off, len, t0, t1, path, tid are adjacent in rec_t: 40 bytes as stored */
            memcpy(p, &r->off, 40);
            p += 40;
#else
            p = put64(p, r->off);
            p = put64(p, r->len);
            p = put64(p, r->t0);
            p = put64(p, r->t1);
            p = put32(p, r->path);
            p = put32(p, r->tid);
#endif
            *p++ = r->op;
            *p++ = r->layer;
            *p++ = r->call;
            *p++ = 0;
        }
        if (emit_frame(fd, p) != 0)
            goto fail;
        at += k;
    }
    goto done;
fail:
    /* No room or no directory: keep the program running, stop writing. */
    G.out_failed = 1;
done:
    if (fd >= 0)
        REAL(close)(fd);
    __atomic_store_n(&G.nrec, 0, __ATOMIC_RELEASE);
}

/* ---- recording ---- */
void push(uint32_t path, int op, int layer, int call, uint64_t off, uint64_t len,
                 uint64_t t0, uint64_t t1)
{
    if (G.nrec >= G.cap)
        flush_locked();
    rec_t *r = &G.recs[G.nrec];
    r->off = off;
    r->len = len;
    r->t0 = t0;
    r->t1 = t1;
    r->path = path;
    r->tid = thread_id();
    r->op = (uint8_t)op;
    r->layer = (uint8_t)layer;
    r->call = (uint8_t)call;
    __atomic_store_n(&G.nrec, G.nrec + 1, __ATOMIC_RELEASE);
    if (G.after_exit)
        flush_locked();
}

/* A request recorded by another layer (libpatio_mpiio.so: MPI-IO calls, layer MPIIO,
 * call codes 11-24 and 31-44 of docs/FORMATS.md) on the file at absolute path `path`.
 * Returns 1 when recorded, 0 when not (tracing off, path not selected, tracer busy). */
EXPORT int patio_trace_record_external(const char *path, int op, uint64_t offset, uint64_t length,
                                       uint64_t t0_ns, uint64_t t1_ns, int call)
{
    if (!path || !active() || foreign_process() || (op != OP_READ && op != OP_WRITE) ||
        offset + length < offset)
        return 0;
    int saved = errno, done = 0;
    char norm[PATH_MAX];
    normalise(NULL, path, norm, sizeof norm);
    if (path[0] != '/' || !path_selected(norm)) {
        errno = saved;
        return 0;
    }
    enter();
    lock();
    uint32_t id = intern_path(norm);
    if (id != UINT32_MAX) {
        push(id, op, LAYER_MPIIO, call, offset, length, t0_ns, t1_ns);
        done = 1;
    }
    unlock();
    leave();
    errno = saved;
    return done;
}
