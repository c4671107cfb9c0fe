/*
 * state.c — the tracer's state and its model of the program's files: the real C library
 * functions, memory pools, interned paths, and per-descriptor state pointing at modelled
 * open file descriptions (offsets, O_APPEND, whether only the kernel knows the position).
 * Declarations in tracer.h.
 */
#include "tracer.h"

/* ---- real functions (resolved by REAL, all at once by lifecycle.c) ---- */
#define DEFINE_REAL(f) __typeof__(f) *real_##f;
TRACER_REAL_FUNCTIONS(DEFINE_REAL)

/* ---- state ---- */
tracer_state_t G;

__thread int tl_busy __attribute__((tls_model("initial-exec")));
__thread pid_t tl_tid __attribute__((tls_model("initial-exec")));

/* ---- memory ---- */
void *map_bytes(size_t n)
{
    void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

/* ---- small text helpers (no stdio: usable from signal handlers) ---- */
size_t put_dec(char *out, uint64_t v)
{
    char tmp[24];
    size_t n = 0, i;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    for (i = 0; i < n; i++)
        out[i] = tmp[n - 1 - i];
    return n;
}

/* Absolute, lexically normalised form of `path` (relative to `base`) into out. */
void normalise(const char *base, const char *path, char *out, size_t cap)
{
    char tmp[2 * PATH_MAX];
    size_t n = 0, o = 0, i;
    if (path[0] != '/' && base) {
        size_t b = strnlen(base, PATH_MAX);
        memcpy(tmp, base, b);
        n = b;
        tmp[n++] = '/';
    }
    i = strnlen(path, PATH_MAX);
    memcpy(tmp + n, path, i);
    n += i;
    tmp[n] = 0;
    /* collapse //, /./ and /../ */
    out[o++] = '/';
    for (i = 0; i < n;) {
        size_t j;
        while (i < n && tmp[i] == '/')
            i++;
        j = i;
        while (j < n && tmp[j] != '/')
            j++;
        if (j == i)
            break;
        if (j - i == 1 && tmp[i] == '.') {
        } else if (j - i == 2 && tmp[i] == '.' && tmp[i + 1] == '.') {
            while (o > 1 && out[o - 1] != '/')
                o--;
            if (o > 1)
                o--;
        } else if (o + (j - i) + 2 < cap) {
            if (o > 1)
                out[o++] = '/';
            memcpy(out + o, tmp + i, j - i);
            o += j - i;
        }
        i = j;
    }
    out[o] = 0;
}

/* ---- paths ---- */
static uint64_t hash_bytes(const char *s, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
    return h;
}

/* Id of `text`, added on first sight; UINT32_MAX when memory ran out. Under the lock. */
uint32_t intern_path(const char *text)
{
    size_t n = strnlen(text, PATH_MAX);
    uint64_t h = hash_bytes(text, n);
    uint32_t *head = &G.buckets[h & (HASH_BUCKETS - 1)];
    for (uint32_t id = *head; id; ) {
        path_t *p = pool_at(&G.paths, id - 1, 0);
        if (p->hash == h && p->len == n && memcmp(p->text, text, n) == 0)
            return id - 1;
        id = p->next;
    }
    if (G.arena_left < n + 1) {
        if (!(G.arena = map_bytes(ARENA_BYTES)))
            return UINT32_MAX;
        G.arena_left = ARENA_BYTES;
    }
    path_t *p = pool_at(&G.paths, G.npaths, 1);
    if (!p)
        return UINT32_MAX;
    memcpy(G.arena, text, n);
    G.arena[n] = 0;
    p->text = G.arena;
    G.arena += n + 1;
    G.arena_left -= n + 1;
    p->len = (uint32_t)n;
    p->hash = h;
    p->next = *head;
    *head = ++G.npaths;
    return G.npaths - 1;
}

int path_selected(const char *path)
{
    if (!G.only_len)
        return 1;
    if (strncmp(path, G.only, G.only_len) != 0)
        return 0;
    return G.only_len == 1 || path[G.only_len] == '/' || path[G.only_len] == 0;
}

/* ---- descriptors (fd_slot, fd_peek and ofd_get are inline in tracer.h) ---- */
static uint32_t ofd_new(uint32_t path, int append, int kernel_pos)
{
    uint32_t i;
    ofd_t *o;
    if (G.free_ofd) {
        i = G.free_ofd - 1;
        o = pool_at(&G.ofds, i, 0);
        G.free_ofd = o->next_free;
    } else {
        i = G.nofd;
        if (!(o = pool_at(&G.ofds, i, 1)))
            return FD_UNTRACED;
        G.nofd++;
    }
    o->offset = 0;
    o->path = path;
    o->refs = 0; /* fd_assign counts the descriptors */
    o->next_free = 0;
    o->append = (uint8_t)append;
    o->kernel_pos = (uint8_t)kernel_pos;
    return i + 2;
}

/* Under the lock: the descriptor stops pointing at its description. */
void fd_release(int fd)
{
    uint32_t *s = fd_slot(fd, 0);
    if (!s)
        return;
    uint32_t v = *s;
    if (v >= 2) {
        ofd_t *o = ofd_get(v);
        if (o && --o->refs == 0) {
            o->next_free = G.free_ofd;
            G.free_ofd = v - 1;
        }
    }
    __atomic_store_n(s, FD_UNKNOWN, __ATOMIC_RELAXED);
}

void fd_assign(int fd, uint32_t v)
{
    uint32_t *s = fd_slot(fd, 1);
    if (!s)
        return;
    if (v >= 2)
        ofd_get(v)->refs++;
    fd_release(fd);
    if (fd > G.max_fd)
        G.max_fd = fd;
    __atomic_store_n(s, v, __ATOMIC_RELAXED);
}

/* The path the kernel has for fd (absolute, symlinks resolved), or "" */
static void fd_path(int fd, char *out, size_t cap)
{
    char link[64] = "/proc/self/fd/";
    size_t n = strlen(link);
    n += put_dec(link + n, (uint64_t)fd);
    link[n] = 0;
    ssize_t r = readlink(link, out, cap - 1);
    out[r > 0 ? r : 0] = 0;
}

/* Under the lock: state for a descriptor that was just opened (`hint`: the path the
 * program gave, `dirfd` the directory it is relative to) or, with hint NULL, one met
 * for the first time (inherited, or opened before the library started). */
uint32_t classify(int fd, const char *hint, int dirfd, int append, int kernel_pos)
{
    struct stat st;
    char path[PATH_MAX];
    if (fstat(fd, &st) != 0 || !(S_ISREG(st.st_mode) || S_ISBLK(st.st_mode)))
        return FD_UNTRACED;
    fd_path(fd, path, sizeof path);
    if (path[0] != '/' && hint) {
        char base[PATH_MAX] = "";
        if (hint[0] != '/') {
            if (dirfd == AT_FDCWD) {
                if (!getcwd(base, sizeof base))
                    base[0] = 0;
            } else {
                fd_path(dirfd, base, sizeof base);
            }
        }
        normalise(base[0] ? base : NULL, hint, path, sizeof path);
    }
    if (path[0] != '/' || !path_selected(path))
        return FD_UNTRACED;
    uint32_t id = intern_path(path);
    if (id == UINT32_MAX)
        return FD_UNTRACED;
    return ofd_new(id, append, kernel_pos);
}

/* Under the lock: the description behind fd, classifying unknown descriptors. */
ofd_t *traced(int fd)
{
    uint32_t *s = fd_slot(fd, 1);
    if (!s)
        return NULL;
    uint32_t v = *s;
    if (v == FD_UNKNOWN) {
        int fl = REAL(fcntl)(fd, F_GETFL);
        v = classify(fd, NULL, AT_FDCWD, fl >= 0 && (fl & O_APPEND), 1);
        fd_assign(fd, v);
    }
    return v >= 2 ? ofd_get(v) : NULL;
}
