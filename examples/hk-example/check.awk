# make check's verdict on hk-validate's report (read from stdin or a file;
# rc=<hk-validate's exit status>). hk-validate counts a check it could not
# run as skipped, and checks of slots this plugin does not offer as "not
# supported" (skipped too; they do not apply). Where no handle can be made,
# with no CUDA driver on the machine, nearly every check is skipped and the
# plugin's CUDA code is not checked at all: that fails here, saying so,
# instead of passing on the few checks that need no driver.
/^[0-9]+ not supported/ { notsup = $1 }
/^[0-9]+ passed, [0-9]+ failed, [0-9]+ skipped$/ { passed = $1; failed = $3; skipped = $5; seen = 1 }
END {
    if (!seen) {
        print "make check: FAILED: hk-validate printed no result line"
        exit 1
    }
    if (rc != 0 || failed > 0) {
        printf "make check: FAILED: hk-validate found %d failure(s) (exit status %d)\n", failed, rc
        exit 1
    }
    missed = skipped - notsup
    if (missed > passed) {
        printf "make check: FAILED: hk-validate ran %d checks and skipped %d that need a handle, " \
               "so nothing of its CUDA code was checked\n", passed, missed
        print "make check: run it where a CUDA driver is, or over handlekit's simulated driver " \
              "(make check SIMULATE=yes, or hk-validate --simulate)"
        exit 1
    }
    printf "make check: %d checks passed, %d skipped (%d of them of slots the plugin does not " \
           "offer)\n", passed, skipped, notsup
}
