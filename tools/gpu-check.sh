#!/usr/bin/env bash
# Runs what needs a real GPU, from trees already built with
#   scons -j2 && scons -j2 mode=release
# : the driver conformance suite, the hk-cuda suites (real driver, no
# simulation; a skipped test fails the step unless it needs the simulated
# driver), hk-host's verified workload on the default plugin, the client
# suite (PyTorch, CuPy, cuda.core, a CUDA runtime program; a skipped case
# fails the step unless its library is not installed), the Java binding's
# GPU tests, optionally
# compute-sanitizer over the GPU suites, and the benchmark.
#
# usage: tools/gpu-check.sh [-q] [-s] [-B] [-L] OUT_DIR
#   -q  quick benchmark (hk-bench --quick)
#   -B  no benchmark
#   -L  leave out the two long validations of hk-cuda (about 5 minutes)
#   -s  also run compute-sanitizer memcheck/racecheck/initcheck on the GPU suites
# Every log goes to OUT_DIR; the summary is printed last. Exit status is the
# number of steps that failed.
set -u
quick=""; sanitize=0; bench=1; long=1
while getopts qsBL o; do
    case $o in q) quick="--quick";; s) sanitize=1;; B) bench=0;; L) long=0;; *) exit 2;; esac
done
shift $((OPTIND - 1))
out=${1:?usage: tools/gpu-check.sh [-q] [-s] OUT_DIR}
mkdir -p "$out"
cd "$(dirname "$0")/.."

unset HK_CUDA_DRIVER SIMCUDA_DEVICES SIMCUDA_FAIL HK_TRACE HK_TRACE_FILE
# The runtime is only dlopen'ed by the tests; make the toolkit's copy findable.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

dbg=build/debug; rel=build/release
fails=0; summary=()
step() { # name, command...
    local name=$1; shift
    local t0=$SECONDS
    "$@" >"$out/$name.txt" 2>&1
    local rc=$?
    # On a GPU only tests that need the simulated driver (fault injection) or,
    # on a one-GPU machine, a second device may be skipped; any other skip is
    # a failure here.
    if grep '^skipped: ' "$out/$name.txt" | grep -v 'simulated driver' \
        | grep -v ': not installed: ' \
        | grep -qvE "needs (2|two) devices[,;] (the driver lists 1|this machine has one)"; then
        echo "gpu-check: $name skipped a test that should run on a GPU" >>"$out/$name.txt"
        [ $rc -ne 0 ] || rc=98
    fi
    local last; last=$(grep -E '[0-9]+ passed, [0-9]+ failed' "$out/$name.txt" | tail -n 1)
    summary+=("$(printf '%-28s exit %-3d %4ds  %s' "$name" "$rc" $((SECONDS - t0)) "$last")")
    [ $rc -eq 0 ] || fails=$((fails + 1))
    echo "${summary[-1]}"
}

nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv >"$out/gpus.txt" 2>&1
cat "$out/gpus.txt"
step conformance        $dbg/tests/test_conformance
step cuda-nodriver      $dbg/tests/test_cuda_nodriver
step cuda-context       $dbg/tests/test_cuda_context
step cuda-abi           $dbg/tests/test_cuda_abi
step cuda-blas1         $dbg/tests/test_cuda_blas1
step cuda-blas1-release $rel/tests/test_cuda_blas1
step hk-host-run        $rel/bin/hk-host run
step cuda-kernels       $dbg/tests/test_cuda_kernels
step cuda-kernels-rel   $rel/tests/test_cuda_kernels
step cuda-capture       $dbg/tests/test_cuda_capture
step cuda-promises      $dbg/tests/test_cuda_promises
step kit-promises       timeout 120 $dbg/tests/test_kit_promises
# A host built from the previous ABI minor's headers (tests/abi) on hk-cuda.
step abi-prev-cuda      $dbg/tests/prev_host -m $rel/plugins/hk-cuda.so
step cuda-capture-rel   $rel/tests/test_cuda_capture
step swap-cuda          $dbg/tests/test_swap_cuda
step hk-host-swap-cuda  $rel/bin/hk-host swap -p $rel/plugins/hk-cuda.so \
    -q $rel/tests/swap_plugins/hk-cuda-1.0.1.so -t 8 -k 100
step hk-host-swap-cuda-prepared $rel/bin/hk-host swap -p $rel/plugins/hk-cuda.so \
    -q $rel/tests/swap_plugins/hk-cuda-1.0.1.so -t 8 -k 100 -P
# The same with the builds swapped away from kept open (keep_old): every
# swap after the first two goes back to a build whose code is loaded.
step hk-host-swap-cuda-keep $rel/bin/hk-host swap -p $rel/plugins/hk-cuda.so \
    -q $rel/tests/swap_plugins/hk-cuda-1.0.1.so -t 8 -k 100 -P -K
step hk-validate-example $rel/bin/hk-validate $dbg/tests/kit/example/hk-example.so
# A plugin without hk.blas1/1: hk-example's two builds, its self-check (its
# kernels) through pins as the workload.
step hk-host-swap-example $rel/bin/hk-host swap -p $dbg/tests/kit/example/hk-example.so \
    -q $dbg/tests/kit/example-b/hk-example.so -t 8 -k 100
# P12 on the GPU: hk-cuda rebuilt (its other build copied over the loaded
# file) while hk-host watch computes through 8 movable handles on it.
watch_cuda() {
    local d rc=1
    d=$(mktemp -d "$PWD/$rel/tests/watch-cuda-XXXXXX") || return 1
    chmod 700 "$d" && cp $rel/plugins/hk-cuda.so "$d/" || return 1
    HK_PLUGIN_PATH=$d $rel/bin/hk-host watch -r 'hk-cuda@^1' -k 1 -s 120 -t 8 >"$d/out" 2>&1 &
    local pid=$! i
    for i in $(seq 1200); do # the start: a deadline, not a pause
        grep -q 'watching the search path' "$d/out" && break
        kill -0 $pid 2>/dev/null || break
        sleep 0.1
    done
    cp $rel/tests/swap_plugins/hk-cuda-1.0.1.so "$d/hk-cuda.so" && { wait $pid; rc=$?; }
    kill $pid 2>/dev/null
    cat "$d/out"
    grep -q 'watch: swapped .*(hk-cuda 1.0.1)' "$d/out" || rc=1
    rm -rf "$d"
    return $rc
}
step hk-host-watch-cuda watch_cuda
if [ $long -eq 1 ]; then
step hk-validate-cuda   $rel/bin/hk-validate $rel/plugins/hk-cuda.so
step hk-validate-cmp    $rel/bin/hk-validate --compare $rel/plugins/hk-cpu.so $rel/plugins/hk-cuda.so
fi
# The Python package against PyTorch and CuPy, where the machine has them.
step python-gpu env HK_LOADER_LIBRARY=$rel/stage/usr/local/lib/libhkloader.so.1 PYTHONPATH=python \
    python3 python/tests/run.py test_gpu
# The Java binding on the GPU (java/tests GpuTest): a PTX kernel loaded,
# taken and launched from Java against a host reference, and hk-cuda's BLAS1
# results equal to hk-cpu's; --strict: a skipped test fails the step.
step java-gpu env HK_TEST_GPU=1 HK_LOADER_LIBRARY=$PWD/$rel/stage/usr/local/lib/libhkloader.so.1 \
    HK_PLUGIN_PATH= HK_TEST_PLUGIN_DIR=$PWD/$rel/plugins HK_TEST_KERNELS=$PWD/$rel/python/tests \
    python3 java/tests/run_junit.py --strict --java java \
    --junit /usr/share/java/junit-platform-console-standalone.jar \
    --cp $rel/java/tests/classes:$rel/java/handlekit.jar:/usr/share/java/jna.jar \
    --select org.handlekit.GpuTest
# Real clients of hk-cuda; --strict: only a missing library or a second
# device may be skipped (tests/clients/README.md), as the step's rule above.
step clients env HK_LOADER_LIBRARY=$rel/stage/usr/local/lib/libhkloader.so.1 PYTHONPATH=python \
    python3 tests/clients/run.py --strict --ptx $rel/tests/clients/client_kernels.ptx \
    --cudart $rel/tests/clients/cudart_client --plugin $rel/plugins/hk-cuda.so
if [ $sanitize -eq 1 ]; then
    # The tests make failing API calls on purpose: only the kernels' errors count.
    # application-only: the loader's probe child is not a CUDA program.
    cs="compute-sanitizer --report-api-errors no --target-processes application-only --error-exitcode 99"
    for tool in memcheck initcheck; do
        step "sanitize-$tool" timeout 400 $cs --tool $tool $rel/tests/test_cuda_blas1
    done
    # racecheck checks every shared-memory access of every block, hundreds of
    # times slower: the suites that run every kernel, both reduction paths and
    # green contexts, on vectors up to 2^20 elements, and hk-host's workload.
    step sanitize-racecheck timeout 400 $cs --tool racecheck $rel/tests/test_cuda_blas1 \
        --only "blas1 numbers" --only "green context:" --only "green context on"
    step sanitize-racecheck-host timeout 300 $cs --tool racecheck $rel/bin/hk-host run
    step sanitize-memcheck-kernels timeout 300 $cs --tool memcheck $rel/tests/test_cuda_kernels
fi
# P8's rows for a plugin without hk.blas1/1: the two builds of hk-example the
# kit's test made (scons test), when they are there.
ex=""
[ -f $dbg/tests/kit/example-b/hk-example.so ] && \
    ex="--example $dbg/tests/kit/example/hk-example.so,$dbg/tests/kit/example-b/hk-example.so"
[ $bench -eq 0 ] || step bench $rel/bin/hk-bench $quick $ex --csv "$out/bench.csv"
echo
printf '%s\n' "${summary[@]}" | tee "$out/summary.txt"
exit $fails
