#!/usr/bin/env python3
"""Runs the Java binding's JUnit 5 tests (java/tests) with the console
launcher and ends with the line "N passed, N failed, N skipped" that
`scons test` totals: passed are the tests that succeeded, failed those that
failed plus containers (test classes) that failed, skipped those disabled or
aborted by an assumption (a test that needs what this machine lacks: the
simulated driver, a GPU). Each failure is repeated as a "FAIL: " line.

usage: run_junit.py [--strict] --java JAVA --junit JAR --cp CLASSPATH [-D...] [--select CLASS]
       (--strict: a skipped test is a failure, for runs where every test must run)
       run_junit.py --skip REASON     (prints the reason and counts one skip)
"""
import argparse
import re
import subprocess
import sys

COUNT = re.compile(r'^\[\s*(\d+) (tests|containers) (successful|failed|skipped|aborted)\s*\]')


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--skip')
    ap.add_argument('--strict', action='store_true')
    ap.add_argument('--java')
    ap.add_argument('--junit')
    ap.add_argument('--cp')
    ap.add_argument('-D', action='append', default=[], dest='props')
    ap.add_argument('--select', action='append', default=[])
    a = ap.parse_args()
    if a.skip:
        print('java: skipped: %s' % a.skip)
        print('0 passed, 0 failed, 1 skipped')
        return 0
    cmd = [a.java] + ['-D' + p for p in a.props] + [
        '-jar', a.junit, '--disable-banner', '--details=tree', '--disable-ansi-colors',
        '--class-path', a.cp]
    cmd += ['--select-class=' + c for c in a.select] if a.select else ['--scan-class-path']
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          errors='replace')
    out = proc.stdout
    sys.stdout.write(out)
    counts = {}
    for line in out.splitlines():
        m = COUNT.match(line.strip())
        if m:
            counts[(m.group(2), m.group(3))] = int(m.group(1))
    if not counts:
        print('java: the JUnit launcher printed no summary (exit status %d)' % proc.returncode)
        print('0 passed, 1 failed, 0 skipped')
        return 1
    passed = counts.get(('tests', 'successful'), 0)
    failed = counts.get(('tests', 'failed'), 0) + counts.get(('containers', 'failed'), 0)
    skipped = counts.get(('tests', 'skipped'), 0) + counts.get(('tests', 'aborted'), 0)
    if a.strict and skipped:
        print('FAIL: %d test(s) skipped in a strict run (each must run here)' % skipped)
        failed, skipped = failed + skipped, 0
    for line in out.splitlines():
        if '\u2718' in line:  # the tree marks a failed test or container with it
            print('FAIL: ' + line.strip(' \u2502\u251c\u2514\u2500'))
    print('%d passed, %d failed, %d skipped' % (passed, failed, skipped))
    return 1 if failed or proc.returncode else 0


if __name__ == '__main__':
    sys.exit(main())
