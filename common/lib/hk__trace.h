/* handlekit: the debug trace (docs/trace.md). Internal, never installed;
 * compiled into the loader and into the kit, so every module (the loader, each
 * plugin built on the kit) has a copy of its own and reads the environment
 * itself.
 *
 * HK_TRACE=<level> turns it on (1 decisions, 2 also per-call context
 * switches, 3 also verbose extras), HK_TRACE_FILE=<path> sends it to a file
 * instead of stderr. Both are read with secure_getenv, once per module, at the
 * first trace site reached (pthread_once), never at load.
 *
 * Cost when off: a site is HK__TRACE(level, area, ...), which reads one
 * global with a relaxed atomic load and takes a branch predicted not taken;
 * its arguments are only evaluated when the branch is taken. Until the
 * environment is read the global holds HK__TRACE_UNREAD, above every level,
 * so the first site reached takes the branch once and reads it; with tracing
 * off the global is 0 from then on. Everything else (reading the environment,
 * formatting, writing) is in cold, non-inlined functions.
 *
 * Line format: "hk <pid>:<tid> <module> <area>: <message>\n", written with
 * one write() call of at most HK__TRACE_LINE_MAX bytes. */
#ifndef HK__TRACE_H
#define HK__TRACE_H

#include <limits.h>
#include <stdatomic.h>

#define HK__TRACE_DECISIONS 1 /* every decision: candidates, selection, binding, re-arm */
#define HK__TRACE_CALLS 2     /* also per-call context switches and restores */
#define HK__TRACE_VERBOSE 3   /* also verbose extras (probe answers, arms, streams) */

/* The value of hk__trace_level before the environment was read. */
#define HK__TRACE_UNREAD INT_MAX

/* A line is cut to this many bytes, newline included: PIPE_BUF, so that a
 * line written to a pipe (stderr into a log collector) is never split
 * either. */
#define HK__TRACE_LINE_MAX 4096

/* Every name here is internal to its module (hidden), so a site reads the
 * level with one PC-relative load, not through the GOT. */
#define HK__TRACE_HIDDEN __attribute__((visibility("hidden")))

/* The module's level: HK__TRACE_UNREAD, then 0 (off) to 3. Read it only
 * through hk__tracing. */
extern HK__TRACE_HIDDEN atomic_int hk__trace_level;

/* 1 when a site of level lvl may have to trace (the cheap test). */
#define hk__tracing(lvl) \
    __builtin_expect(atomic_load_explicit(&hk__trace_level, memory_order_relaxed) >= (lvl), 0)

/* One trace line of level lvl in area ("scan", "ctx", ...): printf format. */
#define HK__TRACE(lvl, area, ...)                            \
    do {                                                     \
        if (hk__tracing(lvl))                                \
            hk__trace_emit((lvl), (area), __VA_ARGS__);      \
    } while (0)

/* 1 when level lvl is traced: for a site that must compute something before
 * it can trace (a loop, a driver query). Reads the environment if needed. */
#define HK__TRACE_ON(lvl) (hk__tracing(lvl) && hk__trace_enabled(lvl))

/* [thread-safe] Reads the environment once, then writes one line if level is
 * traced. Keeps errno. Control characters in the message are written as '?',
 * so an event is always one line. */
HK__TRACE_HIDDEN void hk__trace_emit(int level, const char *area, const char *fmt, ...)
    __attribute__((cold, noinline, format(printf, 3, 4)));

/* [thread-safe] Reads the environment once; 1 when level is traced. */
HK__TRACE_HIDDEN int hk__trace_enabled(int level) __attribute__((cold, noinline));

/* [thread-safe] Names the module in the lines written after it: the first
 * call with a usable name wins (at most 31 bytes; bytes outside printable
 * ASCII and spaces become '?'); NULL or "" is ignored. Before any call the
 * name is HK__TRACE_MODULE, compiled in ("loader", "kit"). */
HK__TRACE_HIDDEN void hk__trace_set_module(const char *name);

#endif /* HK__TRACE_H */
