#!/usr/bin/env python3
"""Run handlekit's test programs listed in a manifest and total their counts.

Each test program prints CUnit's run summary and then one plain line
"N passed, N failed, N skipped". This script runs them one by one from the
repository root, echoes their output, and ends with what failed (each failing
program's failed tests and assertion lines, or the last lines of one that
printed no count) and a total line. It exits non-zero when any program
failed, crashed or printed no count.
"""
import json
import os
import re
import subprocess
import sys
import time

COUNT = re.compile(r'^(\d+) passed, (\d+) failed, (\d+) skipped\s*$')
# What a failure looks like in a program's output: a CUnit test marked
# FAILED and its assertion lines, a validator row, a Python test, a sanitizer.
FAILURE = re.compile(r'\.\.\.FAILED|^\s+\d+\. \S+:\d+ |^\s*\S+\s+FAIL\s|^(FAIL|ERROR): |'
                     r'^SUMMARY: |runtime error:|^WARNING: ThreadSanitizer|ERROR: AddressSanitizer')


def main():
    if len(sys.argv) != 2:
        print('usage: hk_runtests.py MANIFEST', file=sys.stderr)
        return 2
    with open(sys.argv[1]) as f:
        runs = json.load(f)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    total = [0, 0, 0]
    bad = []
    failures = []
    for i, run in enumerate(runs, 1):
        env = dict(os.environ)
        # A debug trace switched on in the caller's shell would add lines to
        # the output of every test and driver calls to the fault walks that
        # count them: only the trace tests, which set it themselves, trace.
        for var in ('HK_TRACE', 'HK_TRACE_FILE'):
            env.pop(var, None)
        env.update(run['env'])
        label = run['name']
        print('==== [%d/%d] %s' % (i, len(runs), label), flush=True)
        t0 = time.monotonic()
        proc = subprocess.run(run['argv'], cwd=root, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, errors='replace')
        sys.stdout.write(proc.stdout)
        counts = None
        for line in proc.stdout.splitlines():
            m = COUNT.match(line.strip())
            if m:
                counts = [int(g) for g in m.groups()]
        dt = time.monotonic() - t0
        if counts is None:
            print('==== %s: no result line, exit status %d (%.1f s)' % (label, proc.returncode, dt))
            total[1] += 1
            bad.append(label)
            failures.append((label, ['(no result line; its last lines:)']
                             + proc.stdout.splitlines()[-15:]))
            continue
        for k in range(3):
            total[k] += counts[k]
        if proc.returncode != 0 or counts[1] > 0:
            bad.append(label)
            lines = [l for l in proc.stdout.splitlines() if FAILURE.search(l)]
            failures.append((label, lines[:40]))
        print('==== %s: exit status %d (%.1f s)' % (label, proc.returncode, dt), flush=True)
    print()
    # Repeated at the end, where the last lines of a long log show them.
    for label, lines in failures:
        print('---- %s: what failed' % label)
        for line in lines:
            print(line)
    if bad:
        print('failing programs: ' + ', '.join(bad))
    print('total: %d passed, %d failed, %d skipped' % tuple(total))
    return 1 if bad or total[0] == 0 else 0


if __name__ == '__main__':
    sys.exit(main())
