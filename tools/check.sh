#!/usr/bin/env bash
# The whole test suite, as CI runs it:
#   1. every test program in the debug build          (scons test)
#   2. the same suite built with ASan + UBSan         (scons --sanitize=address,undefined test)
#   3. the same suite built with TSan                 (scons --sanitize=thread test)
#   4. valgrind over hk-host and the loader tests     (no error, no definite leak)
# `scons test` holds the house rules (tests/house, docs/house.md): steps 1-3
# each check them on the objects of their own build, and a broken rule fails
# that step like any other test (its circles or offenders in the digest).
# Each step prints its own output; the last line is the sum of every step's
# counts, "total: N passed, N failed, N skipped". The exit status is non-zero
# when any step failed.
#
# usage: tools/check.sh [-j N] [--quick]
#   --quick   only step 1 (the same as `scons -Q -j2 test`)
set -u
cd "$(dirname "$0")/.."
# A debug trace switched on in the shell would change what the tests print.
unset HK_TRACE HK_TRACE_FILE

# Files the build makes are writable by their owner only: the loader refuses
# plugins that others may write (README, "the trust rule").
umask 022
# The tests load the plugins they build, so the checkout must pass the
# loader's rule: every directory from / down is root's or ours and writable by
# its owner only, but for one sticky directory (such as /tmp) above
# directories that all are. A checkout that fails it (a group-writable clone,
# made under umask 002) is copied to a directory that passes, and checked
# there. (The set-user-ID tests, which need uid 65534 to reach the build,
# skip with the reason where a private home directory keeps it out.)
trusted() { # dir
    local d owner mode sticky=0
    d=$(realpath "$1") || return 1
    while :; do
        owner=$(stat -c %u "$d") mode=$(stat -c %a "$d") || return 1
        { [ "$owner" -eq 0 ] || [ "$owner" -eq "$(id -u)" ]; } || return 1
        if [ $(( 8#$mode & 8#022 )) -ne 0 ]; then
            # writable by others: only as the one sticky directory (walking
            # up, every directory seen before it was owner-writable only)
            [ $(( 8#$mode & 8#1000 )) -ne 0 ] && [ $sticky -eq 0 ] || return 1
            sticky=1
        fi
        [ "$d" = / ] && return 0
        d=$(dirname "$d")
    done
}
if ! trusted "$PWD" && [ -z "${HK_CHECK_RELOCATED:-}" ]; then
    if [ "$(id -u)" -eq 0 ]; then base=/var/cache/handlekit-check; else
        base="${HOME:-/nonexistent}/.cache/handlekit-check"; fi
    dest="$base/$(basename "$PWD")"
    if ! mkdir -p "$dest" || ! trusted "$dest"; then
        echo "check: $PWD is below a directory that others can write (the loader refuses" \
             "plugins there), and $dest is no better: move the checkout" >&2
        exit 1
    fi
    echo "check: $PWD is below a directory that others can write (the loader refuses" \
         "plugins there); checking a copy in $dest"
    tar --exclude=./build --exclude=./.devcarry -cf - . \
        | tar --no-same-permissions -C "$dest" -xf - || exit 1
    cd "$dest" && HK_CHECK_RELOCATED=1 exec tools/check.sh "$@"
fi
jobs=2; quick=0
while [ $# -gt 0 ]; do
    case $1 in
        -j) jobs=${2:?-j needs a number}; shift;;
        --quick) quick=1;;
        *) echo "usage: tools/check.sh [-j N] [--quick]" >&2; exit 2;;
    esac
    shift
done

sum_p=0; sum_f=0; sum_s=0; failed=()
count() { # step name, log file, exit status
    local line p f s
    line=$(grep -E '^(total: )?[0-9]+ passed, [0-9]+ failed, [0-9]+ skipped$' "$2" | tail -n 1)
    if [ -z "$line" ]; then
        echo "check: $1 printed no result line (exit status $3)"
        sum_f=$((sum_f + 1)); failed+=("$1"); return
    fi
    read -r p f s < <(echo "$line" | sed -E 's/^(total: )?([0-9]+) passed, ([0-9]+) failed, ([0-9]+) skipped$/\2 \3 \4/')
    sum_p=$((sum_p + p)); sum_f=$((sum_f + f)); sum_s=$((sum_s + s))
    if [ "$3" -ne 0 ] || [ "$f" -ne 0 ]; then
        failed+=("$1")
        [ "$f" -ne 0 ] || sum_f=$((sum_f + 1))
    fi
}

log=$(mktemp -d)
trap 'rm -rf "$log"' EXIT
step() { # name, command...
    local name=$1; shift
    echo "######## $name: $*"
    local t0=$SECONDS
    set -o pipefail
    "$@" 2>&1 | tee "$log/$name.txt"
    local rc=$?
    set +o pipefail
    echo "######## $name: exit status $rc ($((SECONDS - t0)) s)"
    count "$name" "$log/$name.txt" "$rc"
}

# valgrind over one program: one test, passed when valgrind reports no error
# and no definite leak and the program itself succeeded.
vg() { # name, [VAR=VALUE...], program, args...
    local name=$1; shift
    # Variables go into the environment here: valgrind does not follow
    # `env` into the program it starts.
    while [ $# -gt 0 ] && [[ $1 == [A-Z_]*=* ]]; do export "$1"; shift; done
    if ! command -v valgrind >/dev/null 2>&1; then
        echo "0 passed, 1 failed, 0 skipped  (valgrind is not installed: run tools/setup.sh)"
        return 1
    fi
    valgrind -q --error-exitcode=97 --leak-check=full --errors-for-leak-kinds=definite \
        --child-silent-after-fork=yes \
        --show-leak-kinds=definite --track-fds=no "$@"
    local rc=$?
    if [ $rc -eq 0 ]; then echo "1 passed, 0 failed, 0 skipped"; else
        echo "valgrind $name: exit status $rc (97: valgrind found an error or a leak)"
        echo "0 passed, 1 failed, 0 skipped"
    fi
    return $rc
}

step test scons -Q -j"$jobs" test
if [ $quick -eq 0 ]; then
    step asan-ubsan scons -Q -j"$jobs" --sanitize=address,undefined test
    step tsan scons -Q -j"$jobs" --sanitize=thread test
    step valgrind-hk-host-list vg hk-host-list build/debug/bin/hk-host list
    step valgrind-hk-host-run vg hk-host-run HK_CUDA_DRIVER=/nonexistent build/debug/bin/hk-host run -n 4096
    step valgrind-test-loader vg test-loader HK_TEST_UNDER_VALGRIND=1 build/debug/tests/test_loader
fi

# A digest of what failed, at the end where a reader of the last lines of a
# long log finds it: each failing step's failed tests with their assertions,
# failing programs, crashes and sanitizer reports.
digest() { # step name
    echo "---- $1: what failed"
    # A suite step's runner already ends with its own digest: that part only.
    if grep -q '^---- .*: what failed$' "$log/$1.txt"; then
        sed -n '/^---- .*: what failed$/,/^total: /p' "$log/$1.txt" | head -n 80
        return
    fi
    grep -E -A 4 '\.\.\.FAILED|^FAIL|^ERROR|had failures|failing programs|no result line|exit status [1-9]|^SUMMARY: |WARNING: ThreadSanitizer|ERROR: AddressSanitizer|runtime error:' \
        "$log/$1.txt" | head -n 80
}

echo
for name in "${failed[@]}"; do digest "$name"; done
[ ${#failed[@]} -eq 0 ] || echo "failing steps: ${failed[*]}"
echo "total: $sum_p passed, $sum_f failed, $sum_s skipped"
[ ${#failed[@]} -eq 0 ]
