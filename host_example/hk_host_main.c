/* hk-host: list, inspect and run handlekit plugins. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hk_host.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: hk-host [options] <command>\n"
            "commands:\n"
            "  list        every plugin found (name, version, ABI, path) and every refused\n"
            "              candidate with its reason\n"
            "  info        the chosen plugin's tables and a handle's binding\n"
            "  run         a verified workload: every hk.blas1/1 op in float and double;\n"
            "              exits non-zero on a wrong result\n"
            "  swap -p A -q B [-t T] [-k K] [-n N] [-w MS]\n"
            "              threads call through movable handles while the implementation\n"
            "              is swapped between A and B (hk-host swap -h for details)\n"
            "options:\n"
            "  -p, --plugin NAME|PATH  plugin to use (default: hk-cuda when usable, else hk-cpu)\n"
            "  -n, --size N            vector length for run (default 1048576)\n"
            "  -d, --device N          device ordinal (default: the current one)\n"
            "  -s, --seed N            random seed for run's data (default 1)\n"
            "  -v, --verbose           more detail\n"
            "  -h, --help              this text\n"
            "environment: HK_PLUGIN_PATH (colon-separated directories searched before the\n"
            "built-in plugin directory), HK_CUDA_DRIVER (path of the CUDA driver library)\n");
}

static int parse_long(const char *s, long long lo, long long hi, long long *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 0);
    if (errno || *s == '\0' || *end != '\0' || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

int main(int argc, char **argv)
{
    hk_host_opts_t opts = {NULL, 1 << 20, -1, 0, 1};
    static const struct option longopts[] = {
        {"plugin", required_argument, NULL, 'p'}, {"size", required_argument, NULL, 'n'},
        {"device", required_argument, NULL, 'd'}, {"seed", required_argument, NULL, 's'},
        {"verbose", no_argument, NULL, 'v'},      {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    int c;
    long long v;
    if (argc > 1 && strcmp(argv[1], "swap") == 0) /* its options are its own */
        return hk_host_cmd_swap(argc - 1, argv + 1);
    while ((c = getopt_long(argc, argv, "p:n:d:s:vh", longopts, NULL)) != -1) {
        switch (c) {
        case 'p':
            opts.plugin = optarg;
            break;
        case 'n':
            if (parse_long(optarg, 0, (1LL << 31), &v)) {
                fprintf(stderr, "hk-host: --size %s: not a number in 0..2^31\n", optarg);
                return 2;
            }
            opts.n = v;
            break;
        case 'd':
            if (parse_long(optarg, 0, 1024, &v)) {
                fprintf(stderr, "hk-host: --device %s: not a device ordinal\n", optarg);
                return 2;
            }
            opts.device = (int)v;
            break;
        case 's':
            if (parse_long(optarg, 0, 0xffffffffLL, &v)) {
                fprintf(stderr, "hk-host: --seed %s: not a number\n", optarg);
                return 2;
            }
            opts.seed = (unsigned)v;
            break;
        case 'v':
            opts.verbose = 1;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (optind != argc - 1) {
        usage(stderr);
        return 2;
    }
    const char *cmd = argv[optind];
    if (strcmp(cmd, "list") == 0)
        return hk_host_cmd_list(&opts);
    if (strcmp(cmd, "info") == 0)
        return hk_host_cmd_info(&opts);
    if (strcmp(cmd, "run") == 0)
        return hk_host_cmd_run(&opts);
    fprintf(stderr, "hk-host: unknown command \"%s\" (try --help)\n", cmd);
    return 2;
}
