#!/usr/bin/env bash
# Installs what a fresh Debian 12 (or Ubuntu) machine lacks to build and test
# handlekit: SCons, CUnit, GNU libltdl and a C compiler; for the tests of the
# installed tree and of the Python package also pkg-config (pkgconf), CMake,
# NumPy, venv and setuptools (the package installed by pip in a fresh venv),
# and auditwheel from PyPI, in a private venv (build/tools/venv), for the
# wheel's test; for the Java binding (java/) a JDK (openjdk-17-jdk-headless),
# JNA (libjna-java) and JUnit 5 (junit5, its console launcher). Idempotent and
# quiet when nothing is missing. The CUDA toolkit is not installed here (it is large
# and comes from NVIDIA's repository); without it hk-cuda is not built and the
# CPU parts still build and test.
#
# When another process holds the apt or dpkg lock (unattended-upgrades on a
# fresh machine, another apt-get), it says so and waits for it, up to
# HK_SETUP_LOCK_WAIT seconds (default 300), before it gives up.
set -euo pipefail

lock_wait=${HK_SETUP_LOCK_WAIT:-300}
case $lock_wait in
    ''|*[!0-9]*) echo "setup: HK_SETUP_LOCK_WAIT must be a number of seconds" >&2; exit 2;;
esac

# apt-get with its arguments; while it fails only because another process
# holds the apt or dpkg lock, waits and tries again, up to lock_wait seconds.
apt_run() {
    local waited=0 out rc
    while :; do
        rc=0
        out=$($SUDO apt-get "$@" 2>&1) || rc=$?
        [ $rc -ne 0 ] || return 0
        if ! grep -qiE 'could not get lock|unable to (acquire|lock)|another process' <<<"$out"; then
            printf '%s\n' "$out" >&2
            return $rc
        fi
        if [ "$waited" -ge "$lock_wait" ]; then
            printf '%s\n' "$out" >&2
            echo "setup: gave up after ${waited}s: another process still holds the apt/dpkg lock;" \
                 "run this again when it is done (or set HK_SETUP_LOCK_WAIT)" >&2
            return $rc
        fi
        [ "$waited" -gt 0 ] || echo "setup: another process holds the apt/dpkg lock;" \
            "waiting for it (up to ${lock_wait}s)" >&2
        sleep 5
        waited=$((waited + 5))
    done
}

need=()
have_pkg() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'; }
for p in scons libcunit1-dev libltdl-dev gcc python3 python3-numpy python3-venv \
         python3-setuptools cmake valgrind libjna-java junit5; do
    have_pkg "$p" || need+=("$p")
done
# Any JDK 17 or later provides javac; the headless one is installed when none is.
command -v javac >/dev/null 2>&1 || need+=(openjdk-17-jdk-headless)
# pkgconf and the older pkg-config both provide the pkg-config command.
command -v pkg-config >/dev/null 2>&1 || need+=(pkgconf)

if [ ${#need[@]} -gt 0 ]; then
    echo "setup: installing ${need[*]}"
    SUDO=""
    if [ "$(id -u)" -ne 0 ]; then
        if command -v sudo >/dev/null 2>&1; then SUDO="sudo"; else
            echo "setup: need root to install ${need[*]}; run as root or install them yourself" >&2
            exit 1
        fi
    fi
    export DEBIAN_FRONTEND=noninteractive
    apt_run update -qq
    apt_run install -y -qq --no-install-recommends "${need[@]}"
fi

# auditwheel (from PyPI, in a venv of its own under the build tree): the wheel
# test asks it which manylinux tag the wheel meets, and says it skipped that
# check without it. Failing to get it is a warning, not a failure.
tools_venv="$(cd "$(dirname "$0")/.." && pwd)/build/tools/venv"
if [ ! -x "$tools_venv/bin/auditwheel" ]; then
    echo "setup: installing auditwheel into $tools_venv"
    if ! { python3 -m venv "$tools_venv" && \
           "$tools_venv/bin/pip" install -q --disable-pip-version-check auditwheel; } >&2; then
        echo "setup: could not install auditwheel (PyPI); the wheel's manylinux check is skipped" >&2
    fi
fi

cuda_home="${CUDA_HOME:-/usr/local/cuda}"
if [ ! -x "$cuda_home/bin/nvcc" ] && ! command -v nvcc >/dev/null 2>&1; then
    cat >&2 <<MSG
setup: the CUDA toolkit was not found ($cuda_home/bin/nvcc is missing, no nvcc on PATH).
setup: hk-cuda, its kernels and the GPU benchmarks will not be built; the CPU plugin,
setup: the loader, hk-host and the CPU test suites still build and run.
setup: to build hk-cuda, install the CUDA 13 toolkit (NVIDIA's apt repository, package
setup: cuda-toolkit-13-0) or point the build at it: scons cuda_home=/path/to/cuda
MSG
fi
exit 0
