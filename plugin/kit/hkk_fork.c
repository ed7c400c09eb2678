/* handlekit kit: what the process tells the kit, read on its paths: the
 * flag of a fork() child (hkk_forked) and the flag of the process's exit
 * (hkk_exiting), with the handlers that set them. Calls nothing of the kit. */
#include <pthread.h>

#include "hkk_internal.h"

atomic_int hkk_forked;

static pthread_once_t fork_once = PTHREAD_ONCE_INIT;

/* The child of a fork() cannot use CUDA (docs/contexts.md fact 18), and the parent's
 * handles and library are meaningless there: flag it, touch nothing else.
 * Registered with this module's __dso_handle: closing the module removes it
 * (hkk_module.c). */
static void on_fork_child(void)
{
    atomic_store(&hkk_forked, 1);
}

/* Set when the process exits. Registered with this module's __dso_handle
 * too: at exit() it runs before any destructor (the dynamic loader's own
 * exit handler, which runs the destructors, was registered first), while at
 * dlclose it runs after this module's destructor (crtbegin's entry, which
 * calls __cxa_finalize, is the last one of the module's fini array to run).
 * So the module's destructor (hkk_module.c) knows an exit from a close. */
atomic_int hkk_exiting;

/* glibc's (the C++ ABI's) registration of an exit handler owned by the
 * object dso: run at exit(), or when dso is closed, whichever comes first.
 * Called directly rather than through atexit(), which a sanitizer runtime
 * may intercept and register as the program's own (dso NULL): that handler
 * would outlive the module and be called in unmapped memory at exit. */
extern int __cxa_atexit(void (*fn)(void *), void *arg, void *dso);
extern void *__dso_handle __attribute__((visibility("hidden")));

static void on_exit_noted(void *unused)
{
    (void)unused;
    atomic_store(&hkk_exiting, 1);
}

static void register_fork_handler(void)
{
    /* pthread_atfork cannot fail except for lack of memory; then a child would
     * see CUDA errors instead of HK_STATUS_FORKED, which is still a status. */
    (void)pthread_atfork(NULL, NULL, on_fork_child);
    /* Without it (no memory), the destructor may give back at exit what it
     * would give back at a close: still correct while the driver answers. */
    (void)__cxa_atexit(on_exit_noted, NULL, &__dso_handle);
}

void hk_kit_fork_watch(void)
{
    pthread_once(&fork_once, register_fork_handler);
}

int hk_kit_forked(void)
{
    return atomic_load_explicit(&hkk_forked, memory_order_relaxed);
}
