/* Hostile candidates: each is loaded by a "host" in a child process
 * (tl_host_run), so that a crash or exit of the host fails the test instead
 * of ending the suite. Every refusal is checked with the exact report and
 * with a proof that none of the file's code ran in the host: the hostile
 * builds write "<pid> <what>" into $HK_TP_MARKER before misbehaving, and no
 * line may carry the host's pid; the file must not be mapped in the host. */
#include <dirent.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hk_test.h"
#include "test_loader_util.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define TL_SANITIZED 1
#else
#define TL_SANITIZED 0
#endif

static char tmp[4096];    /* this test's directory, under HK_TEST_TMP_DIR */
static char marker[4200]; /* $HK_TP_MARKER */

static void setup(void)
{
    tl_marked_dir(tmp, sizeof(tmp), marker, sizeof(marker));
}

static void teardown(void)
{
    tl_marked_dir_remove(tmp);
}

/* The copy of a file in this test's directory. */
static const char *hostile_copy(const char *file)
{
    static char buf[8400];
    snprintf(buf, sizeof(buf), "%s/%s", tmp, file);
    return buf;
}

/* Opens path in a host child and checks it left exactly this report, that
 * the host survived, and that the file is not mapped there. Returns the
 * number of marker lines written by the host itself (must be 0). */
static int expect_open_refused(const char *path, uint32_t isolation, const char *stage,
                               const char *status, const char *reason)
{
    tl_host_job_t job = {.open_path = path, .isolation = isolation};
    tl_host_run_t run;
    char line[8192];
    int total, by_host;

    CU_ASSERT_EQUAL(tl_host_run(&job, &run), 0);
    snprintf(line, sizeof(line), "report=%s|%s|%s|%s", path, stage, status, reason);
    CU_ASSERT(tl_has_line(&run, line));
    CU_ASSERT(tl_has_line(&run, "plugins=0"));
    CU_ASSERT_PTR_NULL(strstr(run.out, "mapped="));
    tl_marker_count(marker, run.pid, &total, &by_host);
    CU_ASSERT_EQUAL(by_host, 0);
    return total;
}

/* Opens each case's file in a host with probe isolation: refused in the
 * probe stage with its reason, and its code ran once (in the probe), never
 * in the host. */
static void expect_refused_in_probe(const tl_refusal_t *cases, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unlink(marker);
        int total = expect_open_refused(tl_hostile(cases[i].file), HK_ISOLATION_PROBE, "probe",
                                        "LOAD_FAILED", cases[i].reason);
        CU_ASSERT_EQUAL(total, 1); /* it ran once: in the probe */
    }
}

/* A constructor that calls a symbol nobody defines: RTLD_NOW refuses the
 * file, and nothing retries it lazily (which ran the constructor, and the
 * host died with status 127). With and without isolation. */
static void test_unresolved_never_reopened(void)
{
    char reason[4200];
    setup();
    const char *path = tl_hostile("tp_unresolved.so");
    snprintf(reason, sizeof(reason), "%s: undefined symbol: tp_missing_symbol", path);
    for (uint32_t iso = HK_ISOLATION_PROBE; iso <= HK_ISOLATION_OFF; iso++) {
        int total = expect_open_refused(path, iso, "open", "LOAD_FAILED", reason);
        CU_ASSERT_EQUAL(total, 0); /* its constructor ran nowhere */
    }
    teardown();
}

/* The size of the built tp_good.so and its header, to word expectations. */
static void good_elf(off_t *size, Elf64_Ehdr *eh)
{
    struct stat st;
    int fd = open(tl_plugin("tp_good.so"), O_RDONLY);
    CU_ASSERT_FATAL(fd >= 0);
    CU_ASSERT_FATAL(fstat(fd, &st) == 0);
    CU_ASSERT_FATAL(pread(fd, eh, sizeof(*eh), 0) == (ssize_t)sizeof(*eh));
    close(fd);
    *size = st.st_size;
}

/* Truncated copies (an interrupted install) are refused before anything
 * maps them; mapping one made the host die of SIGBUS. */
static void test_truncated_refused_before_mapping(void)
{
    off_t size;
    Elf64_Ehdr eh;
    char r[5][256];
    static const char *files[5] = {"tp_trunc_empty.so", "tp_trunc_header.so",
                                   "tp_trunc_phdrs.so", "tp_trunc_shdrs.so",
                                   "tp_trunc_code.so"};
    setup();
    good_elf(&size, &eh);
    snprintf(r[0], sizeof(r[0]), "not an ELF file (0 bytes)");
    snprintf(r[1], sizeof(r[1]), "truncated ELF: the header needs 64 bytes, file is 40 bytes");
    snprintf(r[2], sizeof(r[2]), "truncated ELF: program headers end at %llu, file is 100 bytes",
             (unsigned long long)(eh.e_phoff + (unsigned long long)eh.e_phnum * eh.e_phentsize));
    snprintf(r[3], sizeof(r[3]), "truncated ELF: section headers end at %llu, file is %llu bytes",
             (unsigned long long)(eh.e_shoff + (unsigned long long)eh.e_shnum * eh.e_shentsize),
             (unsigned long long)size - 1);
    for (uint32_t iso = HK_ISOLATION_PROBE; iso <= HK_ISOLATION_OFF; iso++) {
        for (int i = 0; i < 4; i++)
            expect_open_refused(tl_hostile(files[i]), iso, "open", "LOAD_FAILED", r[i]);
        tl_host_job_t job = {.open_path = tl_hostile(files[4]), .isolation = iso};
        tl_host_run_t run;
        char prefix[4400], suffix[128];
        CU_ASSERT_EQUAL(tl_host_run(&job, &run), 0);
        snprintf(prefix, sizeof(prefix), "report=%s|open|LOAD_FAILED|truncated ELF: segment ",
                 tl_hostile(files[4]));
        snprintf(suffix, sizeof(suffix), ", file is 4200 bytes");
        CU_ASSERT(tl_has_line_like(&run, prefix, suffix));
        CU_ASSERT_PTR_NULL(strstr(run.out, "mapped="));
    }
    teardown();
}

/* Constructors the static rule cannot see (built without the toolchain's
 * start files): the probe runs them, the host never maps the file. */
static void test_constructor_crash_exit_hang(void)
{
    static const tl_refusal_t cases[] = {
        {"tp_ctor_crash.so", "loading killed by SIGSEGV"},
        {"tp_ctor_exit.so", "loading exited with status 3"},
        {"tp_ctor_hang.so", "loading did not finish within 300 ms"},
    };
    setup();
    expect_refused_in_probe(cases, sizeof(cases) / sizeof(cases[0]));
    teardown();
}

static void test_negotiation_crash_exit_hang_garbage(void)
{
    static const tl_refusal_t cases[] = {
        {"tp_neg_crash.so", "negotiation killed by SIGSEGV"},
        {"tp_neg_exit.so", "negotiation exited with status 3"},
        {"tp_neg_hang.so", "negotiation did not answer within 300 ms"},
        {"tp_neg_garbage.so", "negotiation wrote a malformed answer: it does not start with "
                              "the answer header"},
    };
    setup();
    expect_refused_in_probe(cases, sizeof(cases) / sizeof(cases[0]));
    teardown();
}

/* A constructor beside the toolchain's entry, or DT_INIT moved out of .init:
 * refused from the file alone, so no process ever runs it. */
static void test_initialization_functions_refused(void)
{
    setup();
    for (uint32_t iso = HK_ISOLATION_PROBE; iso <= HK_ISOLATION_OFF; iso++) {
        int total = expect_open_refused(
            tl_hostile("tp_ctor_marker.so"), iso, "open", "LOAD_FAILED",
            "has 2 initialization functions (DT_INIT_ARRAY), the toolchain's one and 1 "
            "constructor: loading a plugin must run no code");
        CU_ASSERT_EQUAL(total, 0);

        tl_host_job_t job = {.open_path = tl_hostile("tp_init_fn.so"), .isolation = iso};
        tl_host_run_t run;
        char prefix[4400];
        CU_ASSERT_EQUAL(tl_host_run(&job, &run), 0);
        snprintf(prefix, sizeof(prefix), "report=%s|open|LOAD_FAILED|DT_INIT is 0x",
                 tl_hostile("tp_init_fn.so"));
        CU_ASSERT(tl_has_line_like(&run, prefix, ", not the .init section: loading a plugin "
                                                 "must run no code"));
        CU_ASSERT_PTR_NULL(strstr(run.out, "mapped="));
        int by_host;
        tl_marker_count(marker, run.pid, &total, &by_host);
        CU_ASSERT_EQUAL(total, 0);
    }
    teardown();
}

/* Copies tp_ctor_marker_ns.so (its constructor writes a marker line) to
 * dir/name with mode; the copy's path goes into out. Fails the test when it
 * cannot. */
static void put_marker_ns(const char *dir, const char *name, mode_t mode, char *out, size_t n)
{
    CU_ASSERT_EQUAL_FATAL(tl_copy(tl_hostile("tp_ctor_marker_ns.so"), dir, name, mode, out, n),
                          0);
}

/* Makes tmp/name a directory with mode (chmod: the umask must not hide
 * bits). */
static void make_dir(const char *name, mode_t mode, char *out, size_t n)
{
    snprintf(out, n, "%s/%s", tmp, name);
    CU_ASSERT_EQUAL_FATAL(mkdir(out, 0700), 0);
    CU_ASSERT_EQUAL_FATAL(chmod(out, mode), 0);
}

/* A libtool .la file naming a world-writable library: libltdl would load
 * the library it names. Only "*.so" files are candidates. */
static void test_la_file_refused(void)
{
    char ww[4200], lib[8400], la[4300];
    setup();
    make_dir("ww", 0777, ww, sizeof(ww));
    put_marker_ns(ww, "ww.so", 0666, lib, sizeof(lib));
    snprintf(la, sizeof(la), "%s/evil.la", tmp);
    FILE *f = fopen(la, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fprintf(f, "# evil.la - a libtool library file\ndlname='ww.so'\nlibrary_names='ww.so'\n"
               "old_library=''\ndependency_libs=''\ninstalled=yes\nlibdir='%s'\n", ww);
    fclose(f);
    for (uint32_t iso = HK_ISOLATION_PROBE; iso <= HK_ISOLATION_OFF; iso++) {
        int total = expect_open_refused(la, iso, "scan", "LOAD_FAILED",
                                        "not a plugin file name: only \"*.so\" files are "
                                        "loaded (never a libtool .la file)");
        CU_ASSERT_EQUAL(total, 0);
    }
    teardown();
}

/* A link in a trusted directory pointing into a world-writable one: the
 * resolved path is what is checked (a sticky directory's rule is in
 * test_loader_trust.c). */
static void test_symlink_into_writable_dir(void)
{
    char ww[4200], p[8400], link[4300], reason[8600];
    setup();
    make_dir("ww", 0777, ww, sizeof(ww));
    put_marker_ns(ww, "p.so", 0644, p, sizeof(p));
    snprintf(link, sizeof(link), "%s/link.so", tmp);
    CU_ASSERT_EQUAL_FATAL(symlink(p, link), 0);
    snprintf(reason, sizeof(reason), "directory %s is writable by others (mode 0777)", ww);
    int total = expect_open_refused(link, HK_ISOLATION_OFF, "scan", "INSECURE", reason);
    CU_ASSERT_EQUAL(total, 0);
    /* The control: a link to a trusted file loads, under the link's name. */
    snprintf(link, sizeof(link), "%s/good.so", tmp);
    CU_ASSERT_EQUAL_FATAL(symlink(tl_plugin("tp_good.so"), link), 0);
    tl_host_job_t job = {.open_path = link};
    tl_host_run_t run;
    CU_ASSERT_EQUAL(tl_host_run(&job, &run), 0);
    snprintf(reason, sizeof(reason), "report=%s|loaded|OK|", link);
    CU_ASSERT(tl_has_line(&run, reason));
    teardown();
}

static void test_group_writable_refused(void)
{
    char p[8400], gw[4200], reason[8600];
    setup();
    put_marker_ns(tmp, "gw.so", 0664, p, sizeof(p));
    int total = expect_open_refused(p, HK_ISOLATION_OFF, "scan", "INSECURE",
                                    "file is writable by its group (mode 0664)");
    CU_ASSERT_EQUAL(total, 0);

    make_dir("gw", 0775, gw, sizeof(gw));
    put_marker_ns(gw, "p.so", 0644, p, sizeof(p));
    snprintf(reason, sizeof(reason), "directory %s is writable by its group (mode 0775)", gw);
    total = expect_open_refused(p, HK_ISOLATION_OFF, "scan", "INSECURE", reason);
    CU_ASSERT_EQUAL(total, 0);
    teardown();
}

/* Owned by another user than root and us (uid 65534, "nobody"). */
static void test_foreign_owner_refused(void)
{
    char p[8400], dir[4200], reason[8600];
    setup();
    put_marker_ns(tmp, "foreign.so", 0644, p, sizeof(p));
    CU_ASSERT_EQUAL_FATAL(chown(p, 65534, 65534), 0);
    snprintf(reason, sizeof(reason), "file is owned by uid 65534, neither root nor the effective "
             "user (uid %lu)", (unsigned long)geteuid());
    int total = expect_open_refused(p, HK_ISOLATION_OFF, "scan", "INSECURE", reason);
    CU_ASSERT_EQUAL(total, 0);

    make_dir("foreign", 0755, dir, sizeof(dir));
    put_marker_ns(dir, "p.so", 0644, p, sizeof(p));
    CU_ASSERT_EQUAL_FATAL(chown(dir, 65534, 65534), 0);
    snprintf(reason, sizeof(reason), "directory %s is owned by uid 65534, neither root nor the "
             "effective user (uid %lu)", dir, (unsigned long)geteuid());
    total = expect_open_refused(p, HK_ISOLATION_OFF, "scan", "INSECURE", reason);
    CU_ASSERT_EQUAL(total, 0);
    teardown();
}

/* A refused file's verdict is kept: scanning again probes nothing; a file
 * changed on disk is a new candidate and is probed again. */
static void test_verdict_remembered(void)
{
    char p[8400], q[8400];
    setup();
    CU_ASSERT_EQUAL_FATAL(tl_copy(tl_hostile("tp_ctor_crash.so"), tmp, "crash.so", 0644, p,
                                  sizeof(p)), 0);
    CU_ASSERT_EQUAL_FATAL(tl_copy(tl_plugin("tp_good.so"), tmp, "good.so", 0644, q,
                                  sizeof(q)), 0);
    tl_host_job_t job = {.scan_dir = tmp, .scans = 3};
    tl_host_run_t run;
    int total, by_host;
    CU_ASSERT_EQUAL(tl_host_run(&job, &run), 0);
    tl_marker_count(marker, run.pid, &total, &by_host);
    CU_ASSERT_EQUAL(total, 1); /* three scans, one probe */
    CU_ASSERT_EQUAL(by_host, 0);
    CU_ASSERT(tl_has_line(&run, "plugins=1"));
    /* one report per file: count the lines */
    int reports = 0;
    for (const char *s = run.out; (s = strstr(s, "report=")) != NULL; s++)
        reports++;
    CU_ASSERT_EQUAL(reports, 2);
    teardown();
}

static void test_probe_unusable(void)
{
    char p[8400], reason[8600];
    setup();
    tl_host_job_t job = {.open_path = tl_plugin("tp_good.so"),
                         .probe_path = "/nonexistent/hk-probe"};
    tl_host_run_t run;
    snprintf(reason, sizeof(reason), "report=%s|probe|LOAD_FAILED|no usable probe program: "
             "/nonexistent/hk-probe: no such file", tl_plugin("tp_good.so"));
    CU_ASSERT_EQUAL(tl_host_run(&job, &run), 0);
    CU_ASSERT(tl_has_line(&run, reason));

    /* a probe program others could have replaced is not run */
    CU_ASSERT_EQUAL_FATAL(tl_copy(HK_TEST_PROBE, tmp, "hk-probe", 0777, p, sizeof(p)), 0);
    job.probe_path = p;
    CU_ASSERT_EQUAL(tl_host_run(&job, &run), 0);
    snprintf(reason, sizeof(reason), "report=%s|probe|LOAD_FAILED|no usable probe program: %s: "
             "file is writable by others (mode 0777)", tl_plugin("tp_good.so"), p);
    CU_ASSERT(tl_has_line(&run, reason));

    /* without isolation the probe is not needed */
    job.isolation = HK_ISOLATION_OFF;
    CU_ASSERT_EQUAL(tl_host_run(&job, &run), 0);
    snprintf(reason, sizeof(reason), "report=%s|loaded|OK|", tl_plugin("tp_good.so"));
    CU_ASSERT(tl_has_line(&run, reason));
    teardown();
}

/* Every hostile build and truncated copy, plus two good plugins, in one
 * directory: one report each in name order, the good ones load, the scan
 * ends, and the hangs cost the time limit about once, not once each. */
static void test_hostile_dir_scan(void)
{
    /* In name order; the two refused by the initialization-function rule
     * load in sanitizer builds, where the rule is off. */
    static const char *all[] = {
        "tp_ctor_crash.so", "tp_ctor_exit.so", "tp_ctor_hang.so", "tp_ctor_marker.so",
        "tp_init_fn.so", "tp_neg_crash.so", "tp_neg_exit.so", "tp_neg_garbage.so",
        "tp_neg_hang.so", "tp_trunc_code.so", "tp_trunc_empty.so", "tp_trunc_header.so",
        "tp_trunc_phdrs.so", "tp_trunc_shdrs.so", "tp_unresolved.so",
    };
    const char *bad[sizeof(all) / sizeof(all[0])];
    size_t nbad = 0;
    for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
        if (!TL_SANITIZED || (strcmp(all[i], "tp_ctor_marker.so") != 0
                              && strcmp(all[i], "tp_init_fn.so") != 0))
            bad[nbad++] = all[i];
    char p[8400], line[8600];
    setup();
    for (size_t i = 0; i < nbad; i++)
        CU_ASSERT_EQUAL_FATAL(tl_copy(tl_hostile(bad[i]), tmp, bad[i], 0644, p, sizeof(p)), 0);
    CU_ASSERT_EQUAL_FATAL(tl_copy(tl_plugin("tp_good.so"), tmp, "a_good.so", 0644, p,
                                  sizeof(p)), 0);
    CU_ASSERT_EQUAL_FATAL(tl_copy(tl_plugin("tp_twin2.so"), tmp, "z_twin.so", 0644, p,
                                  sizeof(p)), 0);
    tl_host_job_t job = {.scan_dir = tmp, .scans = 2};
    tl_host_run_t run;
    CU_ASSERT_EQUAL(tl_host_run(&job, &run), 0);
    CU_ASSERT(tl_has_line(&run, "plugins=2"));
    snprintf(line, sizeof(line), "report=%s/a_good.so|loaded|OK|", tmp);
    CU_ASSERT(tl_has_line(&run, line));
    snprintf(line, sizeof(line), "report=%s/z_twin.so|loaded|OK|", tmp);
    CU_ASSERT(tl_has_line(&run, line));
    /* the reports, in name order, one per file */
    const char *at = run.out;
    for (size_t i = 0; i <= nbad; i++) {
        snprintf(line, sizeof(line), "report=%s/%s|", tmp, i < nbad ? bad[i] : "z_twin.so");
        const char *hit = strstr(at, line);
        CU_ASSERT_PTR_NOT_NULL(hit);
        if (hit) {
            CU_ASSERT_PTR_NULL(strstr(hit + 1, line));
            at = hit;
        }
    }
    int total, by_host;
    tl_marker_count(marker, run.pid, &total, &by_host);
    CU_ASSERT_EQUAL(by_host, 0);
    /* Two hangs at 300 ms each, probed side by side. */
    CU_ASSERT(run.ms > 0 && run.ms < 5000);
    printf("\n    scan of %zu hostile and 2 good candidates, twice: %.1f ms ", nbad, run.ms);
    teardown();
}

/* Under elevated privileges a path named by the caller is refused; only the
 * default directory loads. The set-user-ID copy of the helper is given
 * "open PATH" arguments by the (less privileged) caller. */
static void test_setuid_caller_path_refused(void)
{
    char path[8400], out[65536], cmd[20000], line[9000], p[8400];
    setup();
    CU_ASSERT_EQUAL_FATAL(mkdir(HK_TEST_SECURE_DIR, 0755) == 0 || errno == EEXIST, 1);
    CU_ASSERT_EQUAL_FATAL(tl_copy(tl_plugin("tp_good.so"), HK_TEST_SECURE_DIR, "sd_good.so",
                                  0644, p, sizeof(p)), 0);
    CU_ASSERT_EQUAL_FATAL(tl_copy(HK_TEST_SECURE_HELPER, tmp, "helper", 0755, path,
                                  sizeof(path)), 0);
    CU_ASSERT_EQUAL_FATAL(chown(path, 65534, 65534), 0);
    CU_ASSERT_EQUAL_FATAL(chmod(path, 04755), 0);
    snprintf(cmd, sizeof(cmd), "%s open %s open %s", path, tl_plugin("tp_twin1.so"), p);
    FILE *f = popen(cmd, "r");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    size_t got = fread(out, 1, sizeof(out) - 1, f);
    out[got] = '\0';
    CU_ASSERT_EQUAL(pclose(f), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "secure=1\n"));
    snprintf(line, sizeof(line), "open=%s|INSECURE|the process runs with elevated privileges "
             "(AT_SECURE): only plugins in the default directory are loaded\n",
             tl_plugin("tp_twin1.so"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, line));
    snprintf(line, sizeof(line), "open=%s|OK|\n", p);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, line));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "plugins=1\n")); /* the default directory's */
    if (!strstr(out, line))
        printf("\n    helper said:\n%s", out);
    unlink(p);
    rmdir(HK_TEST_SECURE_DIR);
    teardown();
}

static int count_fds(void)
{
    int n = 0;
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return -1;
    while (readdir(d))
        n++;
    closedir(d);
    return n;
}

/* Refused candidates (by the file, the probe, or the host itself) and an
 * unload-safe plugin leave no descriptor behind once the loader is gone. */
static void test_no_descriptor_left(void)
{
    static const char *files[] = {"tp_neg_crash.so", "tp_trunc_code.so", "tp_unresolved.so"};
    char p[8400];
    setup();
    for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++)
        CU_ASSERT_EQUAL_FATAL(tl_copy(tl_hostile(files[i]), tmp, files[i], 0644, p, sizeof(p)), 0);
    CU_ASSERT_EQUAL_FATAL(tl_copy(tl_plugin("tp_nosym.so"), tmp, "nosym.so", 0644, p,
                                  sizeof(p)), 0);
    CU_ASSERT_EQUAL_FATAL(tl_copy(tl_plugin("tp_unload.so"), tmp, "unload.so", 0644, p,
                                  sizeof(p)), 0);
    int before = count_fds();
    for (uint32_t iso = HK_ISOLATION_PROBE; iso <= HK_ISOLATION_OFF; iso++) {
        hk_loader_options_t o;
        memset(&o, 0, sizeof(o));
        o.size = sizeof(o);
        o.default_dir = tmp;
        o.ignore_env = 1;
        o.probe_timeout_ms = 300;
        o.isolation = iso;
        hk_loader_t *loader = NULL;
        CU_ASSERT_EQUAL_FATAL(hk_loader_create(&o, &loader), HK_STATUS_OK);
        if (iso == HK_ISOLATION_OFF) /* the crashing negotiation stays out */
            CU_ASSERT_EQUAL(unlink(hostile_copy(files[0])), 0);
        CU_ASSERT_EQUAL(hk_loader_scan(loader), HK_STATUS_OK);
        CU_ASSERT_EQUAL(hk_loader_plugin_count(loader), 1);
        CU_ASSERT_EQUAL(hk_loader_destroy(loader), HK_STATUS_OK);
        CU_ASSERT_EQUAL(count_fds(), before);
    }
    teardown();
}

void tl_register_hostile(void)
{
    CU_pSuite s = hk_test_suite("loader_hostile", NULL, NULL);
    hk_test_add(s, "unresolved symbol: refused, never reopened lazily",
                test_unresolved_never_reopened);
    hk_test_add(s, "truncated ELF: refused before mapping", test_truncated_refused_before_mapping);
    hk_test_add(s, "constructor crash, exit, hang: refused by the probe",
                test_constructor_crash_exit_hang);
    hk_test_add(s, "negotiation crash, exit, hang, garbage: refused by the probe",
                test_negotiation_crash_exit_hang_garbage);
    CU_pTest t = hk_test_add(s, "constructor or own DT_INIT: refused from the file",
                             test_initialization_functions_refused);
    if (TL_SANITIZED)
        hk_test_skip(t, "the initialization-function rule is off in sanitizer builds");
    hk_test_add(s, "libtool .la file refused", test_la_file_refused);
    hk_test_add(s, "symbolic link into a world-writable directory refused",
                test_symlink_into_writable_dir);
    hk_test_add(s, "group-writable file and directory refused", test_group_writable_refused);
    t = hk_test_add(s, "file and directory of another owner refused",
                    test_foreign_owner_refused);
    if (geteuid() != 0)
        hk_test_skip(t, "needs root to give files to uid 65534");
    hk_test_add(s, "a verdict is remembered: no second probe", test_verdict_remembered);
    hk_test_add(s, "missing or writable probe program: refused, or isolation off",
                test_probe_unusable);
    hk_test_add(s, "hostile directory: one report each, good ones load",
                test_hostile_dir_scan);
    hk_test_add(s, "refused and unloaded candidates leave no descriptor",
                test_no_descriptor_left);
    t = hk_test_add(s, "set-user-ID: caller's path refused, default directory loads",
                    test_setuid_caller_path_refused);
    const char *why = tl_setuid_loading_unavailable();
    if (why)
        hk_test_skip(t, why);
}
