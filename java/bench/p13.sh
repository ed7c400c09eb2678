#!/usr/bin/env bash
# P13: the per-call cost of Java over C for hk.blas1/1 sscal at n = 2^12 on
# hk-cpu, both measured side by side in one JVM (java/bench/P13.java: rounds
# through the binding alternate with rounds of the same calls made from C by
# libhkp13.so on the same buffer). Prints both medians, the ratio and the
# difference per call.
#
# usage: java/bench/p13.sh [BUILD_DIR [ROUNDS [CALLS]]]   (default build/release; build it
#        first: scons mode=release)
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build/release}
jna=${HK_JNA_JAR:-/usr/share/java/jna.jar}
for f in "$build/java/handlekit.jar" "$build/java/bench/libhkp13.so" "$build/plugins/hk-cpu.so"; do
    [ -e "$f" ] || { echo "p13: $f is missing (scons -Q -j2 mode=release builds it)" >&2; exit 1; }
done
# The staged install's loader (<build>/stage): it finds hk-probe as installed.
lib=$(find "$build/stage" -name libhkloader.so.1 2>/dev/null | head -n 1)
[ -n "$lib" ] || { echo "p13: no libhkloader.so.1 in the staged install $build/stage" >&2; exit 1; }
HK_LOADER_LIBRARY=$PWD/$lib exec java -Dhandlekit.p13.library="$PWD/$build/java/bench/libhkp13.so" \
    -cp "$build/java/bench/classes:$build/java/handlekit.jar:$jna" P13 \
    "$PWD/$build/plugins/hk-cpu.so" "${@:2}"
