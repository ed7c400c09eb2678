/* hk-host, run as a user would: list, fallback to hk-cpu without a driver,
 * hk-cuda on the simulated driver, a wrong result, a plugin lacking slots,
 * hostile names, -p with NAME@RANGE and paths, list's marks with two
 * versions side by side, info without a usable GPU, --json checked by a
 * strict parser, the progress line (only on a terminal), and the validate
 * and bench commands. Its command line: test_host_cli.c. */
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hk_blas1.h"
#include "host_util.h"

/* The slot count of hk.blas1/1 as its header lists it: what info says a
 * host knows. */
#define BLAS1_SLOT(name, minor, params, args) +1
static const int blas1_slots = 0 HK_BLAS1_V1_SLOTS(BLAS1_SLOT);

static void test_list(void)
{
    expect(run, NO_DRIVER HK_TEST_HOST " list", 0,
           "2 plugin(s) loaded; * marks the one its name selects",
           "  * hk-cpu     1.0.0    ABI 1.2  ", "hk-cuda", NULL);
}

static void test_list_reports_refused(void)
{
    char dir[512], path[600], cmd[1400], *out;
    temp_dir(dir, sizeof dir, "test");
    snprintf(path, sizeof path, "%s/notaplugin.so", dir);
    FILE *f = fopen(path, "w");
    CU_ASSERT_FATAL(f != NULL);
    for (int i = 0; i < 8; i++) /* long enough to be read as a header */
        fputs("this is not an ELF file, whatever its name says\n", f);
    fclose(f);
    snprintf(cmd, sizeof cmd, "env HK_PLUGIN_PATH=%s HK_CUDA_DRIVER=/x " HK_TEST_HOST " list",
             dir);
    out = expect_kept(run, cmd, 0, /* refusals do not stop the others */
                      "1 candidate(s) refused", "notaplugin.so: open: ", "not an ELF file",
                      "hk-cpu", NULL);
    /* list prints each refusal once, in its report, not again as a warning */
    const char *first = strstr(out, "notaplugin.so: open");
    CU_ASSERT_PTR_NOT_NULL_FATAL(first);
    CU_ASSERT_PTR_NULL(strstr(first + 1, "notaplugin.so: open"));
    free(out);
    remove_tree(dir);
}

/* Two versions of hk-twin side by side: the name selects 1.10.0 (a text
 * comparison would take 1.4.1), and the other line says why not it. */
static void test_list_marks_chosen_version(void)
{
    expect(run, TWINS HK_TEST_HOST " list", 0,
           "  * hk-twin    1.10.0   ABI 1.2  " HK_TEST_TWIN_DIR "/hk-twin-b.so\n",
           "\n    hk-twin    1.4.1    ABI 1.2  " HK_TEST_TWIN_DIR "/hk-twin-a.so\n"
           "      lower than 1.10.0, the chosen version\n",
           "  * hk-cpu ", NULL);
    expect(run, TWINS "HK_PLUGIN_EXCLUDE=hk-twin@1.10.0 " HK_TEST_HOST " list", 0,
           "  * hk-twin    1.4.1 ",
           "/hk-twin-b.so\n      excluded by HK_PLUGIN_EXCLUDE entry hk-twin@1.10.0\n", NULL);
    expect(run, TWINS "HK_PLUGIN_PIN=hk-twin@1.4.1 " HK_TEST_HOST " list", 0,
           "  * hk-twin    1.4.1 ", "/hk-twin-b.so\n      pinned to 1.4.1 by HK_PLUGIN_PIN\n",
           NULL);
}

static void test_plugin_request(void)
{
    char *out;
    expect(run, TWINS HK_TEST_HOST " run -n 100 -p hk-twin@~1.4", 0,
           "plugin: hk-twin 1.4.1 (-p hk-twin@~1.4: highest version in ~1.4)\n",
           "all results verified", NULL);
    expect(run, TWINS HK_TEST_HOST " -p hk-twin run -n 100", 0,
           "plugin: hk-twin 1.10.0 (-p hk-twin: highest version in any release)\n", NULL);
    expect(run, TWINS HK_TEST_HOST " info -p " HK_TEST_TWIN_A, 0,
           "plugin: hk-twin 1.4.1 (-p " HK_TEST_TWIN_A ")\n", NULL);
    /* Nothing in range: one line on stderr naming every candidate, no output. */
    out = expect_kept(run_out, TWINS HK_TEST_HOST " run -p hk-twin@^2", 1, NULL);
    CU_ASSERT_STRING_EQUAL(out, "");
    free(out);
    out = expect_kept(run_err, TWINS HK_TEST_HOST " run -p hk-twin@^2", 1,
                      "hk-host: hk-twin@^2: found 1.4.1 (",
                      "1.10.0 (" HK_TEST_TWIN_DIR "/hk-twin-b.so: outside ^2); none in range\n",
                      NULL);
    CU_ASSERT_EQUAL(lines(out), 1);
    free(out);
    out = expect_kept(run_err, TWINS HK_TEST_HOST " info -p hk-twin@1.x.y.z", 2, "bad range",
                      NULL);
    CU_ASSERT_EQUAL(lines(out), 1);
    free(out);
}

static void test_run_falls_back_without_driver(void)
{
    expect(run, NO_DRIVER HK_TEST_HOST " run -n 5000", 0,
           "plugin: hk-cpu 1.0.0 (hk-cuda is unusable: NO_DRIVER: ", "/nonexistent/libcuda.so.1",
           "20 checks, 0 wrong or failed: all results verified", NULL);
}

/* A copy of hk-host (and hk-probe) in dir/bin with hk-cpu.so and a file
 * named hk-cuda.so in dir/plugins, its default directory, each of the two
 * with the mode given; 0 leaves that one out. */
static void host_tree(const char *dir, mode_t cpu_mode, mode_t cuda_mode)
{
    char sub[PATH_MAX + 16], from[1200], to[PATH_MAX + 32], *copy = strdup(HK_TEST_HOST);
    const char *bin = dirname(copy);
    static const char *const progs[] = {"hk-host", "hk-probe"};
    snprintf(sub, sizeof sub, "%s/bin", dir);
    CU_ASSERT_FATAL(mkdir(sub, 0755) == 0);
    for (int i = 0; i < 2; i++) {
        snprintf(from, sizeof from, "%s/%s", bin, progs[i]);
        snprintf(to, sizeof to, "%s/%s", sub, progs[i]);
        copy_file(from, to, 0755);
    }
    snprintf(sub, sizeof sub, "%s/plugins", dir);
    CU_ASSERT_FATAL(mkdir(sub, 0755) == 0);
    snprintf(from, sizeof from, "%s/../plugins/hk-cpu.so", bin);
    if (cpu_mode) {
        snprintf(to, sizeof to, "%s/hk-cpu.so", sub);
        copy_file(from, to, cpu_mode);
    }
    if (cuda_mode) { /* any file: it is refused before it is read */
        snprintf(to, sizeof to, "%s/hk-cuda.so", sub);
        copy_file(from, to, cuda_mode);
    }
    free(copy);
}

/* A fresh directory for host_tree, its path resolved as hk-host's reports
 * give it. */
static void causes_dir(char *dir)
{
    char made[512];
    temp_dir(made, sizeof made, "causes");
    CU_ASSERT_FATAL(realpath(made, dir) != NULL);
}

/* When nothing usable is found, the first line says so and each refused
 * candidate follows on a line of its own: the default directory, refused as
 * a whole (it lies below a directory anyone may write), or the files of
 * both names; a fallback to hk-cpu names the refused hk-cuda.so. */
static void test_no_usable_plugin_names_causes(void)
{
    char dir[PATH_MAX], ww[PATH_MAX + 8], cmd[3 * PATH_MAX], want[4 * PATH_MAX], *out;
    causes_dir(dir);
    snprintf(ww, sizeof ww, "%s/ww", dir);
    CU_ASSERT_FATAL(mkdir(ww, 0700) == 0 && chmod(ww, 0777) == 0);
    host_tree(ww, 0644, 0);
    for (int info = 0; info < 2; info++) {
        snprintf(cmd, sizeof cmd, NO_DRIVER "%s/bin/hk-host %s", ww, info ? "info" : "run -n 10");
        snprintf(want, sizeof want, "hk-host: no usable plugin: hk-cuda: no plugin named hk-cuda "
                 "is loaded (no plugin is loaded); hk-cpu: no plugin named hk-cpu is loaded (no "
                 "plugin is loaded); refused:\nhk-host:   %s/plugins (the default directory): "
                 "scan: INSECURE: directory %s is writable by others (mode 0777)\n", ww, ww);
        out = expect_kept(run_err, cmd, 1, NULL);
        CU_ASSERT_STRING_EQUAL(out, want);
        free(out);
    }
    remove_tree(dir);

    causes_dir(dir);
    host_tree(dir, 0664, 0664);
    snprintf(cmd, sizeof cmd, NO_DRIVER "%s/bin/hk-host run -n 10", dir);
    snprintf(want, sizeof want, "hk-host: no usable plugin: hk-cuda: no plugin named hk-cuda is "
             "loaded (no plugin is loaded); hk-cpu: no plugin named hk-cpu is loaded (no plugin "
             "is loaded); refused:\n"
             "hk-host:   %s/plugins/hk-cuda.so: scan: INSECURE: file is writable by its group "
             "(mode 0664)\n"
             "hk-host:   %s/plugins/hk-cpu.so: scan: INSECURE: file is writable by its group "
             "(mode 0664)\n", dir, dir);
    out = expect_kept(run_err, cmd, 1, NULL);
    CU_ASSERT_STRING_EQUAL(out, want);
    free(out);
    snprintf(cmd, sizeof cmd, "chmod 644 %s/plugins/hk-cpu.so && " NO_DRIVER
             "%s/bin/hk-host run -n 10", dir, dir);
    snprintf(want, sizeof want, "plugin: hk-cpu 1.0.0 (hk-cuda is unusable: no plugin named "
             "hk-cuda is loaded (loaded: hk-cpu); refused: %s/plugins/hk-cuda.so: scan: "
             "INSECURE: file is writable by its group (mode 0664))\n", dir);
    expect(run, cmd, 0, want, "all results verified", NULL);
    remove_tree(dir);
}

static void test_run_on_simulated_gpu(void)
{
#ifdef HK_TEST_SIM_DIR
    expect(run,
           "env LD_LIBRARY_PATH=" HK_TEST_SIM_DIR " HK_CUDA_DRIVER=" HK_TEST_SIM_DIR
           "/libcuda.so.1 " HK_TEST_HOST " run -n 5000",
           0, "plugin: hk-cuda ", "(a CUDA device is usable)",
           "20 checks, 0 wrong or failed: all results verified", NULL);
#endif
}

static void test_run_catches_wrong_result(void)
{
    expect(run, NO_DRIVER HK_TEST_HOST " run -n 1000 -p " HK_TEST_WRONG, 1, "plugin: hk-wrong",
           "saxpy  host   n=1000      WRONG", "FAILED", NULL);
}

/* A legal plugin without set_pointer_mode, sscal and sdot, whose blas1 table
 * is declared too short for snrm2 and dnrm2: each is a "not supported" row,
 * everything else runs and is checked, and the exit status is 0. */
static void test_run_on_plugin_missing_slots(void)
{
    expect(run, NO_DRIVER HK_TEST_HOST " run -n 1000 -p " HK_TEST_MISSING, 0, "plugin: hk-missing",
           "sscal  host   n=1000      not supported (hk.blas1/1 has no sscal)",
           "sdot   host   n=1000      not supported (hk.blas1/1 has no sdot)",
           "snrm2  host   n=1000      not supported (hk.blas1/1 has no snrm2)",
           "dnrm2  host   n=1000      not supported (hk.blas1/1 has no dnrm2)",
           "ddot   host   n=1000      ok",
           "saxpy  device n=1000      not supported (the plugin has no set_pointer_mode)",
           "6 checks, 0 wrong or failed, 14 not supported: all results verified", NULL);
    /* info counts the slots the plugin fills in the table the host gets */
    char line[64];
    snprintf(line, sizeof line, "  hk.blas1/1     72 bytes, 6 of %d slots\n", blas1_slots);
    expect(run, NO_DRIVER HK_TEST_HOST " info -p " HK_TEST_MISSING, 0, line, NULL);
}

/* The evil plugin under a file name with control characters, in a fresh
 * directory (*dir), with a file that is not a plugin beside it. */
static void evil_dir(char *dir, size_t len)
{
    char path[600];
    temp_dir(dir, len, "esc");
    snprintf(path, sizeof path, "%s/evil\001\nname.so", dir);
    copy_file(HK_TEST_EVIL, path, 0755);
    snprintf(path, sizeof path, "%s/notaplugin.so", dir);
    write_file(path, "this is not an ELF file, whatever its name says, and it is long enough "
                     "to be read as a header by the loader's ELF check\n", 0644);
}

/* A plugin's name and version and a file's name reach the terminal escaped:
 * no raw control character from them is printed. */
static void test_plugin_strings_escaped(void)
{
    char dir[512], cmd[1400], *out;
    evil_dir(dir, sizeof dir);
    snprintf(cmd, sizeof cmd, "env HK_PLUGIN_PATH=%s HK_CUDA_DRIVER=/x " HK_TEST_HOST " list", dir);
    out = expect_kept(run, cmd, 0, "hk-\\x1b[31mevil\\x07\\x09name 1.0\\x7f  ABI 1.2",
                      "/evil\\x01\\x0aname.so\n      its name cannot be requested", NULL);
    int raw = 0;
    for (const char *c = out; c && *c; c++)
        raw += (*c > 0 && *c < 0x20 && *c != '\n') || *c == 0x7f;
    CU_ASSERT_EQUAL(raw, 0);
    free(out);
    remove_tree(dir);
}

/* info on hk-cuda without a driver: everything from the file, then the
 * handle's failure as the last line; status 1. */
static void test_info_without_gpu(void)
{
#ifdef HK_TEST_CUDA_PLUGIN
    char *out;
    CU_ASSERT_EQUAL(run(NO_DRIVER HK_TEST_HOST " info -p hk-cuda", &out), 1);
    char want[512];
    snprintf(want, sizeof want, "\nABI: 1.2\nflags: 0x5 (unload-safe, memory: CUDA device)\n"
             "tables:\n"
             "  hk.blas1/1    %3zu bytes, %d of %d slots\n"
             "  hk.memory/1    48 bytes, 5 of 5 slots\n"
             "  hk.kernels/1   56 bytes\n"
             "  hk.cuda/1      32 bytes\n"
             "  hk.trim/1      16 bytes\n"
             "handle: cannot be created: NO_DRIVER: ",
             sizeof(hk_blas1_v1_t), blas1_slots, blas1_slots);
    CU_ASSERT(has(out, want));
    const char *last = strstr(out, "handle: ");
    CU_ASSERT(last && lines(last) == 1 && last[strlen(last) - 1] == '\n');
    free(out);
#endif
}

static void test_json_list(void)
{
    char dir[512], cmd[1600], *out;
    evil_dir(dir, sizeof dir);
    snprintf(cmd, sizeof cmd, "env HK_PLUGIN_PATH=%s:" HK_TEST_TWIN_DIR " HK_CUDA_DRIVER=/x "
             HK_TEST_HOST " list --json", dir);
    CU_ASSERT_EQUAL(run_out(cmd, &out), 0);
    CU_ASSERT_EQUAL(json_check(out, "d[\"command\"] == \"list\" and d[\"exit_status\"] == 0",
                               "d[\"errors\"] == []",
                               "[(p[\"version\"], p[\"selected\"], p[\"verdict\"]) for p in "
                               "d[\"plugins\"] if p[\"name\"] == \"hk-twin\"] == [(\"1.4.1\", "
                               "False, \"lower\"), (\"1.10.0\", True, \"chosen\")]",
                               "[p[\"reason\"] for p in d[\"plugins\"] if p[\"version\"] == "
                               "\"1.4.1\"] == [\"lower than 1.10.0, the chosen version\"]",
                               "[(p[\"version\"], p[\"path\"][-14:], p[\"selected\"]) for p in "
                               "d[\"plugins\"] if \"evil\" in p[\"name\"]] == [(\"1.0\\x7f\", "
                               "\"/evil\\x01\\nname.so\", False)]",
                               "\"hk-\\x1b[31mevil\\x07\\tname\" in [p[\"name\"] for p in "
                               "d[\"plugins\"]]",
                               "all(set(p) >= {\"name\", \"version\", \"abi\", \"path\", "
                               "\"flags\", \"memory\", \"selected\", \"reason\"} for p in "
                               "d[\"plugins\"])",
                               "[(r[\"path\"][-14:], r[\"stage\"], r[\"status\"]) for r in "
                               "d[\"refused\"]] == [(\"/notaplugin.so\", \"open\", "
                               "\"LOAD_FAILED\")]",
                               "\"not an ELF file\" in d[\"refused\"][0][\"reason\"]", NULL),
                    0);
    free(out);
    remove_tree(dir);
}

static void test_json_info(void)
{
    char *out, tables[256];
    snprintf(tables, sizeof tables, "[(t[\"name\"], t[\"size\"], t[\"slots\"], t[\"present\"]) "
             "for t in d[\"tables\"]] == [(\"hk.blas1/1\", %zu, %d, %d), "
             "(\"hk.memory/1\", 48, 5, 5)]", sizeof(hk_blas1_v1_t), blas1_slots, blas1_slots);
    CU_ASSERT_EQUAL(run_out(NO_DRIVER HK_TEST_HOST " info --json", &out), 0);
    CU_ASSERT_EQUAL(json_check(out, "d[\"command\"] == \"info\" and d[\"exit_status\"] == 0",
                               "d[\"plugin\"][\"name\"] == \"hk-cpu\"",
                               "d[\"plugin\"][\"why\"].startswith(\"hk-cuda is unusable: "
                               "NO_DRIVER: \")",
                               "d[\"plugin\"][\"abi\"] == \"1.2\" and d[\"plugin\"][\"memory\"]"
                               " == \"host\" and d[\"plugin\"][\"unload_safe\"]",
                               tables,
                               "d[\"handle\"] == {\"created\": True, \"error\": None, "
                               "\"device\": -1, \"context_id\": 0, \"owns_primary\": False}",
                               NULL),
                    0);
    free(out);
#ifdef HK_TEST_CUDA_PLUGIN
    CU_ASSERT_EQUAL(run_out(NO_DRIVER HK_TEST_HOST " info -p hk-cuda --json", &out), 1);
    CU_ASSERT_EQUAL(json_check(out, "d[\"exit_status\"] == 1",
                               "d[\"plugin\"][\"memory\"] == \"cuda\"",
                               "len(d[\"tables\"]) == 5",
                               "d[\"handle\"][\"created\"] is False",
                               "d[\"handle\"][\"error\"].startswith(\"NO_DRIVER: \")", NULL),
                    0);
    free(out);
#endif
}

static void test_json_run(void)
{
    char *out;
    CU_ASSERT_EQUAL(run_out(NO_DRIVER HK_TEST_HOST " run -n 1000 --json", &out), 0);
    CU_ASSERT_EQUAL(json_check(out, "d[\"command\"] == \"run\" and d[\"exit_status\"] == 0",
                               "d[\"plugin\"][\"name\"] == \"hk-cpu\"",
                               "d[\"workload\"] == {\"table\": \"hk.blas1/1\", \"n\": 1000, "
                               "\"seed\": 1}",
                               "len(d[\"rows\"]) == 20 and all(r[\"result\"] == \"ok\" and "
                               "r[\"n\"] == 1000 and r[\"rel_err\"] <= r[\"tol\"] and "
                               "r[\"time_ms\"] >= 0 and r[\"error\"] is None for r in d[\"rows\"])",
                               "[r[\"op\"] + \" \" + r[\"mode\"] for r in d[\"rows\"]][:6] == "
                               "[\"saxpy host\", \"sscal host\", \"scopy host\", \"sdot host\", "
                               "\"snrm2 host\", \"daxpy host\"]",
                               "d[\"summary\"] == {\"checks\": 20, \"wrong_or_failed\": 0, "
                               "\"not_supported\": 0, \"verdict\": \"all results verified\"}",
                               NULL),
                    0);
    free(out);
    CU_ASSERT_EQUAL(run_out(NO_DRIVER HK_TEST_HOST " run -n 1000 --json -p " HK_TEST_MISSING,
                            &out), 0);
    CU_ASSERT_EQUAL(json_check(out, "sum(r[\"result\"] == \"not-supported\" for r in d[\"rows\"])"
                                    " == 14",
                               "[r[\"error\"] for r in d[\"rows\"] if r[\"op\"] == \"sdot\"][0] "
                               "== \"hk.blas1/1 has no sdot\"",
                               "[r[\"rel_err\"] for r in d[\"rows\"] if r[\"op\"] == \"sdot\"][0]"
                               " is None", NULL),
                    0);
    free(out);
    CU_ASSERT_EQUAL(run_out(NO_DRIVER HK_TEST_HOST " run -n 1000 --json -p " HK_TEST_WRONG, &out),
                    1);
    CU_ASSERT_EQUAL(json_check(out, "d[\"exit_status\"] == 1",
                               "[r[\"result\"] for r in d[\"rows\"]].count(\"wrong\") >= 1",
                               "d[\"summary\"][\"verdict\"] == \"FAILED\"", NULL),
                    0);
    free(out);
    /* A failure before any row: still one document, with the error. */
    CU_ASSERT_EQUAL(run_out(NO_DRIVER HK_TEST_HOST " run --json -p nosuch", &out), 1);
    CU_ASSERT_EQUAL(json_check(out, "d[\"exit_status\"] == 1 and \"plugin\" not in d",
                               "len(d[\"errors\"]) == 1 and d[\"errors\"][0].startswith("
                               "\"no plugin named nosuch is loaded\")", NULL),
                    0);
    free(out);
}

/* The progress line: on a terminal a long run shows it and erases it; in a
 * pipe, and with --json, there is none. */
static void test_progress_only_on_terminal(void)
{
    char *out = expect_kept(run_out, NO_DRIVER HK_TEST_HOST " run -n 3000000", 0,
                            "20 checks, 0 wrong or failed: all results verified\n", NULL);
    CU_ASSERT_PTR_NULL(strchr(out, '\r'));
    CU_ASSERT_PTR_NULL(strchr(out, '\033'));
    free(out);
    CU_ASSERT_EQUAL(run_tty(NO_DRIVER HK_TEST_HOST " run -n 3000000", &out), 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(out);
    CU_ASSERT(has(out, "/20] "));
    const char *last = out;
    for (const char *p; (p = strstr(last, "/20] ")); last = p + 1) {
    }
    CU_ASSERT(has(last, "\r\033[K")); /* the last one is erased */
    CU_ASSERT(has(out, "all results verified"));
    free(out);
    CU_ASSERT_EQUAL(run_tty(NO_DRIVER HK_TEST_HOST " run -n 3000000 --json", &out), 0);
    CU_ASSERT_PTR_NULL(strchr(out, '\033'));
    CU_ASSERT_PTR_NULL(strstr(out, "/20] "));
    free(out);
}

static void test_validate_passthrough(void)
{
    char dir[512], path[600], cmd[1400], *out, *want;
#ifdef HK_TEST_VALIDATE
    /* The real one, found beside hk-host: the same output and status. */
    int rc = run(HK_TEST_VALIDATE " --list", &want);
    CU_ASSERT_EQUAL(run(HK_TEST_HOST " validate --list", &out), rc);
    CU_ASSERT(lines(out) > 10);
    CU_ASSERT_STRING_EQUAL(out, want);
    free(out);
    free(want);
#endif
    bin_dir(dir, sizeof dir);
    snprintf(cmd, sizeof cmd, "%s/hk-host validate x.so --only 'a b' --json", dir);
    out = expect_kept(run, cmd, 1, /* no hk-validate there yet */
                      "hk-host: validate: ", "/hk-validate: not found (", NULL);
    CU_ASSERT_EQUAL(lines(out), 1);
    free(out);
    snprintf(path, sizeof path, "%s/hk-validate", dir);
    write_file(path, "#!/bin/sh\nfor a in \"$@\"; do echo \"arg: $a\"; done\nexit 7\n", 0755);
    CU_ASSERT_EQUAL(run(cmd, &out), 7);
    CU_ASSERT_STRING_EQUAL(out, "arg: x.so\narg: --only\narg: a b\narg: --json\n");
    free(out);
    remove_tree(dir);
}

/* bench with a stand-in hk-bench that echoes its arguments and writes the
 * CSV named by FAKE_CSV where --csv says. */
static void test_bench(void)
{
    char dir[512], path[600], cmd[2000], *out;
    bin_dir(dir, sizeof dir);
    snprintf(cmd, sizeof cmd, "%s/hk-host bench --quick", dir);
    out = expect_kept(run, cmd, 1,
                      "/hk-bench: not found (it is built by `scons bench` where nvcc and cuBLAS "
                      "are found)\n",
                      NULL);
    CU_ASSERT_EQUAL(lines(out), 1);
    free(out);
    snprintf(path, sizeof path, "%s/hk-bench", dir);
    write_file(path,
               "#!/bin/sh\necho \"hk-bench: $*\"\ncsv=\n"
               "while [ $# -gt 0 ]; do [ \"$1\" = --csv ] && csv=$2; shift; done\n"
               "[ -n \"$FAKE_FAIL\" ] && { echo 'hk-bench: error: no GPU' >&2; exit 1; }\n"
               "[ -n \"$csv\" ] && cp \"$FAKE_CSV\" \"$csv\"\nexit 0\n",
               0755);
    /* A regression against OLD: the table, status 1; the CSV kept. */
    snprintf(cmd, sizeof cmd, "cd %s && FAKE_CSV=" HK_TEST_BENCH_NEW " ./hk-host bench --quick "
             "--only P1 --csv new.csv --compare " HK_TEST_BENCH_OLD " --plot figs", dir);
    expect(run, cmd, 1, "hk-bench: --quick --only P1 --csv new.csv\n",
           "P1  axpy       f32  2^26        1.02     0.9442    -7.5%    5%  WORSE\n",
           "summary: 11 compared: 3 worse,", NULL);
    static const char *const made[] = {"new.csv", "figs/p1.svg", "figs/p2.svg"};
    for (int i = 0; i < 3; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, made[i]);
        CU_ASSERT(access(path, R_OK) == 0);
    }
    /* Within a wider tolerance: status 0; no --csv: a temporary file. */
    snprintf(cmd, sizeof cmd, "cd %s && FAKE_CSV=" HK_TEST_BENCH_NEW " ./hk-host bench "
             "--compare=" HK_TEST_BENCH_OLD " --tolerance 30 -- --csv-like-arg", dir);
    expect(run, cmd, 0, "hk-bench: --csv-like-arg --csv /", " 0 worse,", NULL);
    /* A CSV plot.py cannot read: one line, status 1. */
    snprintf(cmd, sizeof cmd, "cd %s && FAKE_CSV=" HK_TEST_JSON_CHECK " ./hk-host bench "
             "--plot figs2", dir);
    out = expect_kept(run_err, cmd, 1, "plot.py: ", ": not an hk-bench CSV: ", NULL);
    CU_ASSERT_EQUAL(lines(out), 1);
    free(out);
    /* hk-bench fails: its status, its line, nothing compared. */
    snprintf(cmd, sizeof cmd, "cd %s && FAKE_FAIL=1 ./hk-host bench --compare "
             HK_TEST_BENCH_OLD, dir);
    out = expect_kept(run, cmd, 1, "hk-bench: error: no GPU\n", NULL);
    CU_ASSERT_PTR_NULL(strstr(out, "summary:"));
    free(out);
    snprintf(cmd, sizeof cmd, "cd %s && ./hk-host bench --compare nothing.csv", dir);
    expect(run, cmd, 2, "hk-host: bench: --compare nothing.csv: No such file or directory\n",
           NULL);
    remove_tree(dir);
}

int hk_test_register(void)
{
    CU_pSuite s = hk_test_suite("hk-host", NULL, NULL);
    hk_test_add(s, "list shows every plugin", test_list);
    hk_test_add(s, "list reports a refused candidate with its reason", test_list_reports_refused);
    hk_test_add(s, "list marks what each name selects and says why not the others",
                test_list_marks_chosen_version);
    hk_test_add(s, "-p takes NAME, NAME@RANGE and a path", test_plugin_request);
    hk_test_add(s, "run without a driver falls back to hk-cpu, saying why",
                test_run_falls_back_without_driver);
    hk_test_add(s, "no usable plugin: each refused candidate named, one line each",
                test_no_usable_plugin_names_causes);
    CU_pTest t = hk_test_add(s, "run uses hk-cuda on the simulated GPU", test_run_on_simulated_gpu);
#ifndef HK_TEST_SIM_DIR
    hk_test_skip(t, "no simulated driver: built without the CUDA toolkit");
#else
    (void)t;
#endif
    hk_test_add(s, "run exits 1 on a wrong result", test_run_catches_wrong_result);
    hk_test_add(s, "run on a plugin lacking slots: not supported rows, exit 0",
                test_run_on_plugin_missing_slots);
    hk_test_add(s, "plugin and file names with control characters are escaped",
                test_plugin_strings_escaped);
    t = hk_test_add(s, "info without a usable GPU shows the plugin and one handle line",
                    test_info_without_gpu);
#ifndef HK_TEST_CUDA_PLUGIN
    hk_test_skip(t, "hk-cuda is not built: no CUDA toolkit");
#else
    (void)t;
#endif
    hk_test_add(s, "list --json: a strict document, names escaped", test_json_list);
    hk_test_add(s, "info --json: tables and handle", test_json_info);
    hk_test_add(s, "run --json: every row, and failures as documents", test_json_run);
    hk_test_add(s, "the progress line only on a terminal", test_progress_only_on_terminal);
    hk_test_add(s, "validate runs hk-validate and passes its status on",
                test_validate_passthrough);
    hk_test_add(s, "bench: missing hk-bench, CSV, plot and comparison", test_bench);
    host_register_cli(s);
    host_register_mem(s);
    host_register_warn(s);
    host_register_others(hk_test_suite("host_others", NULL, NULL));
    return 0;
}
