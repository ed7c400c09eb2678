/* hk-validate --simulate[=N]: the checks run over handlekit's simulated CUDA
 * driver (tests/simcuda, installed as <libdir>/handlekit/simcuda/libcuda.so.1)
 * with N devices, so that a plugin author without a GPU still has the CUDA
 * code of a plugin checked. The switch is taken out of the arguments before
 * they are parsed; what it does is set the two variables the simulated
 * driver is reached and shaped by, HK_CUDA_DRIVER and SIMCUDA_DEVICES, for
 * hk-validate and every check process it starts. The driver file is then
 * opened under the trust rule like any driver HK_CUDA_DRIVER names.
 *
 * The driver is looked for relative to hk-validate's own file (the file
 * that runs, also when hk-host handed it over as a descriptor):
 *   <dir>/../simcuda/libcuda.so.1        installed: <libdir>/handlekit/bin
 *   <dir>/../tests/simcuda/libcuda.so.1  a build tree: <build>/bin */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hk__cli.h"
#include "hkv.h"

#define HKV_SIM_DEFAULT_DEVICES 2
#define HKV_SIM_MAX_DEVICES 16 /* the simulation's own limit */
#define HKV_SIM_MAX_TEXT "16"

static const char *const hkv_sim_places[] = {"../simcuda/libcuda.so.1",
                                             "../tests/simcuda/libcuda.so.1"};

/* The simulated driver beside this program into path; 0, or -1 with the
 * places looked at in why. */
static int hkv_sim_find(char *path, size_t n, char *why, size_t wn)
{
    char self[PATH_MAX];
    ssize_t k = readlink("/proc/self/exe", self, sizeof self - 1);
    if (k <= 0) {
        snprintf(why, wn, "cannot read /proc/self/exe to find it");
        return -1;
    }
    self[k] = '\0';
    char *slash = strrchr(self, '/');
    if (slash)
        *slash = '\0';
    size_t used = 0;
    why[0] = '\0';
    for (size_t i = 0; i < sizeof hkv_sim_places / sizeof hkv_sim_places[0]; i++) {
        char cand[PATH_MAX + 64];
        snprintf(cand, sizeof cand, "%s/%s", self, hkv_sim_places[i]);
        if (realpath(cand, path) && strlen(path) < n && access(path, R_OK) == 0)
            return 0;
        int w = snprintf(why + used, wn - used, "%s%s", used ? ", " : "", cand);
        if (w > 0 && (size_t)w < wn - used)
            used += (size_t)w;
    }
    return -1;
}

int hkv_simulate_args(int *argc, char **argv, hkv_usage_fn usage)
{
    int devices = 0, out = 1;
    for (int i = 1; i < *argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--")) { /* operands from here on: kept as they are */
            while (i < *argc)
                argv[out++] = argv[i++];
            break;
        }
        if (!strcmp(a, "--simulate")) {
            devices = HKV_SIM_DEFAULT_DEVICES;
        } else if (!strncmp(a, "--simulate=", 11)) {
            long long v;
            if (hk__cli_decimal(a + 11, 1, HKV_SIM_MAX_DEVICES, &v) != 0)
                return usage("%s: not a decimal number from 1 to " HKV_SIM_MAX_TEXT, a);
            devices = (int)v;
        } else {
            argv[out++] = argv[i];
        }
    }
    argv[out] = NULL;
    *argc = out;
    if (!devices)
        return -1;
    char path[PATH_MAX], why[3 * PATH_MAX], num[16];
    if (hkv_sim_find(path, sizeof path, why, sizeof why) != 0) {
        fprintf(stderr, "hk-validate: --simulate: no simulated CUDA driver beside hk-validate "
                "(looked for %s)\n", why);
        return 1;
    }
    snprintf(num, sizeof num, "%d", devices);
    if (setenv("HK_CUDA_DRIVER", path, 1) != 0 || setenv("SIMCUDA_DEVICES", num, 1) != 0) {
        fprintf(stderr, "hk-validate: --simulate: cannot set the environment\n");
        return 1;
    }
    fprintf(stderr, "hk-validate: simulated CUDA driver %s, %d device%s\n", path, devices,
            devices == 1 ? "" : "s");
    return -1;
}
