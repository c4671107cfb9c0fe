/*
 * lifecycle.c — the tracer's process life: initialisation (constructor), the flush at
 * exit (destructor, _exit, _Exit) and before exec (the exec family), fork handlers, and
 * the fatal-signal handler with the sigaction/signal interposers that keep it invisible.
 */
#include "tracer.h"

/* ---- initialisation, exit, fork, signals ---- */
static void flush_now(void)
{
    int saved = errno;
    enter();
    lock();
    flush_locked();
    unlock();
    leave();
    errno = saved;
}

/* Fatal signals. Where the program leaves a fatal signal at its default action, the
 * tracer's handler flushes and then lets the default action happen. The program keeps
 * seeing its own disposition: sigaction/signal report SIG_DFL (with the flags and mask
 * it set) while the tracer's handler stands in for it, and the program's first real
 * handler replaces the tracer's (the program then decides how to end). */
static const int fatal_signals[] = {SIGSEGV, SIGBUS, SIGABRT, SIGTERM, SIGINT};

static int is_fatal(int sig)
{
    for (size_t i = 0; i < sizeof fatal_signals / sizeof fatal_signals[0]; i++)
        if (fatal_signals[i] == sig)
            return 1;
    return 0;
}

static int is_default(const struct sigaction *act)
{
    return !(act->sa_flags & SA_SIGINFO) && act->sa_handler == SIG_DFL;
}

static void on_fatal(int sig, siginfo_t *info, void *ctx)
{
    (void)info;
    (void)ctx;
    int saved = errno;
    if (__atomic_load_n(&G.ready, __ATOMIC_ACQUIRE) == 2 && getpid() == G.pid) {
        /* Interrupted inside the tracer: the lock may be ours; write what is complete. */
        int mine = tl_busy > 0;
        int got = 0;
        tl_busy++;
        if (!mine)
            for (long spins = 0; spins < 2000000 && !got; spins++) {
                got = !__atomic_exchange_n(&G.lock, 1, __ATOMIC_ACQUIRE);
                if (!got && spins > 1000)
                    sched_yield();
            }
        flush_locked();
        if (got)
            unlock();
        tl_busy--;
    }
    G.hooked[sig] = 0;
    REAL(sigaction)(sig, &G.old_act[sig], NULL);
    errno = saved;
    raise(sig); /* blocked until this handler returns, then the default action */
}

static void tracer_action(struct sigaction *act)
{
    memset(act, 0, sizeof *act);
    act->sa_sigaction = on_fatal;
    act->sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&act->sa_mask);
}

static void hook_signals(void)
{
    for (size_t i = 0; i < sizeof fatal_signals / sizeof fatal_signals[0]; i++) {
        int sig = fatal_signals[i];
        struct sigaction old, act;
        if (REAL(sigaction)(sig, NULL, &old) != 0 || !is_default(&old))
            continue; /* ignored or handled by the program: its business */
        tracer_action(&act);
        G.old_act[sig] = old;
        if (REAL(sigaction)(sig, &act, NULL) == 0)
            G.hooked[sig] = 1;
    }
}

EXPORT int sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
    if (sig <= 0 || sig >= NSIG || !is_fatal(sig) || !active())
        return REAL(sigaction)(sig, act, old);
    if (G.hooked[sig]) {
        struct sigaction view = G.old_act[sig];
        if (act && !is_default(act)) {
            int r = REAL(sigaction)(sig, act, NULL);
            if (r != 0)
                return r;
            G.hooked[sig] = 0;
        } else if (act) {
            G.old_act[sig] = *act;
        }
        if (old)
            *old = view;
        return 0;
    }
    if (act && is_default(act)) {
        /* Back to the default action: the tracer's handler stands in again. */
        struct sigaction ours;
        tracer_action(&ours);
        int r = REAL(sigaction)(sig, &ours, old);
        if (r == 0) {
            G.old_act[sig] = *act;
            G.hooked[sig] = 1;
        }
        return r;
    }
    return REAL(sigaction)(sig, act, old);
}

/* signal() with glibc's (BSD) semantics, through the sigaction above. */
EXPORT sighandler_t signal(int sig, sighandler_t handler)
{
    if (sig <= 0 || sig >= NSIG || !is_fatal(sig) || !active())
        return REAL(signal)(sig, handler);
    struct sigaction act, old;
    memset(&act, 0, sizeof act);
    act.sa_handler = handler;
    act.sa_flags = SA_RESTART;
    sigemptyset(&act.sa_mask);
    sigaddset(&act.sa_mask, sig);
    if (sigaction(sig, &act, &old) != 0)
        return SIG_ERR;
    return (old.sa_flags & SA_SIGINFO) ? (sighandler_t)(void (*)(void))old.sa_sigaction : old.sa_handler;
}

static void describe_process(void)
{
    G.pid = getpid();
    G.ppid = getppid();
    G.file_seq = 0;
    G.have_name = 0;
    G.out_failed = 0;
    G.paths_written = 0;
    G.nrec = 0;
    tl_tid = 0;
}

/* Descriptions are now shared with another process: only the kernel knows positions. */
static void share_all_descriptions(void)
{
    for (uint32_t i = 0; i < G.nofd; i++) {
        ofd_t *o = pool_at(&G.ofds, i, 0);
        if (o && o->refs)
            o->kernel_pos = 1;
    }
}

/* fork: the lock is held across it so the child's copy of the state is consistent
 * (unless fork is called by a signal handler that interrupted the tracer, which holds
 * it already). */
static __thread int tl_fork_locked __attribute__((tls_model("initial-exec")));

static void before_fork(void)
{
    tl_fork_locked = __atomic_load_n(&G.ready, __ATOMIC_ACQUIRE) == 2 && !tl_busy;
    if (!tl_fork_locked)
        return;
    enter();
    lock();
}

static void after_fork_parent(void)
{
    if (!tl_fork_locked)
        return;
    share_all_descriptions();
    unlock();
    leave();
}

static void after_fork_child(void)
{
    if (__atomic_load_n(&G.ready, __ATOMIC_ACQUIRE) != 2)
        return;
    describe_process();
    share_all_descriptions();
    if (tl_fork_locked) {
        unlock();
        leave();
    }
}

static int32_t launcher_rank(void)
{
    static const char *vars[] = {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK",
                                 "SLURM_PROCID"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *v = getenv(vars[i]);
        char *end;
        if (!v || !*v)
            continue;
        long r = strtol(v, &end, 10);
        if (*end == 0 && r >= 0 && r <= INT32_MAX)
            return (int32_t)r;
    }
    return -1;
}

/* Resolves every real function now, while the process is (normally) single-threaded:
 * dlsym takes the loader's lock, and must never be called under the tracer's lock (a
 * library constructor running under the loader's lock may do I/O). */
static void resolve_all(void)
{
#define RESOLVE_REAL(f) (void)REAL(f);
    TRACER_REAL_FUNCTIONS(RESOLVE_REAL)
#undef RESOLVE_REAL
}

void init_once(void)
{
    int expected = 0;
    if (!__atomic_compare_exchange_n(&G.ready, &expected, 1, 0, __ATOMIC_ACQ_REL,
                                     __ATOMIC_ACQUIRE))
        return;
    int saved = errno;
    int state = 3;
    tl_busy++;
    const char *dir = getenv("PATIO_TRACE_DIR");
    if (!dir || !*dir)
        goto out;
    char cwd[PATH_MAX];
    normalise(dir[0] == '/' ? NULL : getcwd(cwd, sizeof cwd), dir, G.dir, sizeof G.dir);
    const char *only = getenv("PATIO_TRACE_ONLY");
    if (only && *only) {
        if (!realpath(only, G.only))
            normalise(only[0] == '/' ? NULL : getcwd(cwd, sizeof cwd), only, G.only,
                      sizeof G.only);
        G.only_len = strlen(G.only);
        while (G.only_len > 1 && G.only[G.only_len - 1] == '/')
            G.only[--G.only_len] = 0;
    }
    const char *cap = getenv("PATIO_TRACE_BUFFER");
    G.cap = DEFAULT_BUFFER;
    if (cap && *cap) {
        long c = strtol(cap, NULL, 10);
        if (c >= 1 && c <= (1l << 24))
            G.cap = (uint32_t)c;
    }
    G.fds.elem = sizeof(uint32_t);
    G.ofds.elem = sizeof(ofd_t);
    G.paths.elem = sizeof(path_t);
    G.recs = map_bytes((size_t)G.cap * sizeof(rec_t));
    G.buckets = map_bytes(HASH_BUCKETS * sizeof(uint32_t));
    G.stage = map_bytes(STAGE_BYTES);
    if (!G.recs || !G.buckets || !G.stage)
        goto out;
    if (gethostname(G.host, sizeof G.host - 1) != 0 || !G.host[0])
        memcpy(G.host, "localhost", 10);
    for (char *c = G.host; *c; c++)
        if (*c == '/')
            *c = '_';
    ssize_t n = readlink("/proc/self/exe", G.exe, sizeof G.exe - 1);
    G.exe[n > 0 ? n : 0] = 0;
    resolve_all();
    G.rank = launcher_rank();
    G.init_ns = now_ns();
    crc_init();
    describe_process();
    G.max_fd = -1;
    pthread_atfork(before_fork, after_fork_parent, after_fork_child);
    hook_signals();
    state = 2;
out:
    tl_busy--;
    __atomic_store_n(&G.ready, state, __ATOMIC_RELEASE);
    errno = saved;
}

__attribute__((constructor)) static void patio_trace_start(void) { init_once(); }

__attribute__((destructor)) static void patio_trace_stop(void)
{
    if (__atomic_load_n(&G.ready, __ATOMIC_ACQUIRE) != 2 || foreign_process())
        return;
    flush_now();
    /* Requests made by later destructors are written one frame at a time. */
    G.after_exit = 1;
}

static void flush_for_exit_or_exec(void)
{
    if (__atomic_load_n(&G.ready, __ATOMIC_ACQUIRE) == 2 && !tl_busy && !foreign_process())
        flush_now();
}

/* ---- exec and exit: write what this image recorded first ---- */
EXPORT int execve(const char *path, char *const argv[], char *const envp[])
{
    flush_for_exit_or_exec();
    return REAL(execve)(path, argv, envp);
}

EXPORT int execv(const char *path, char *const argv[])
{
    flush_for_exit_or_exec();
    return REAL(execv)(path, argv);
}

EXPORT int execvp(const char *file, char *const argv[])
{
    flush_for_exit_or_exec();
    return REAL(execvp)(file, argv);
}

EXPORT int execvpe(const char *file, char *const argv[], char *const envp[])
{
    flush_for_exit_or_exec();
    return REAL(execvpe)(file, argv, envp);
}

EXPORT int fexecve(int fd, char *const argv[], char *const envp[])
{
    flush_for_exit_or_exec();
    return REAL(fexecve)(fd, argv, envp);
}

/* execl family: the variadic arguments become an argv on the stack; execle's
 * environment follows the terminating NULL. */
#define COLLECT_ARGS(arg0, argv)                                             \
    size_t argc = 1;                                                         \
    va_list ap;                                                              \
    va_start(ap, arg0);                                                      \
    while (va_arg(ap, const char *))                                         \
        argc++;                                                              \
    va_end(ap);                                                              \
    char *argv[argc + 1];                                                    \
    argv[0] = (char *)(arg0);                                                \
    va_start(ap, arg0);                                                      \
    for (size_t i = 1; i <= argc; i++)                                       \
        argv[i] = va_arg(ap, char *)

EXPORT int execl(const char *path, const char *arg, ...)
{
    COLLECT_ARGS(arg, argv);
    va_end(ap);
    return execv(path, argv);
}

EXPORT int execlp(const char *file, const char *arg, ...)
{
    COLLECT_ARGS(arg, argv);
    va_end(ap);
    return execvp(file, argv);
}

EXPORT int execle(const char *path, const char *arg, ...)
{
    COLLECT_ARGS(arg, argv);
    char **envp = va_arg(ap, char **);
    va_end(ap);
    return execve(path, argv, envp);
}

EXPORT void _exit(int status)
{
    flush_for_exit_or_exec();
    REAL(_exit)(status);
    syscall(SYS_exit_group, status);
    __builtin_unreachable();
}

EXPORT void _Exit(int status)
{
    flush_for_exit_or_exec();
    REAL(_Exit)(status);
    syscall(SYS_exit_group, status);
    __builtin_unreachable();
}
