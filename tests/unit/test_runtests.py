#!/usr/bin/env python3
"""Tests of site_scons/hk_runtests.py, the runner behind `scons test`: it sums
the counts, fails on a failed, crashed or silent program, and repeats what
failed just above its total line, where the end of a long log shows it.

Ends with "N passed, N failed, N skipped"; exits 1 when a test failed.
"""
import json
import os
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'common'))
import hk_unittest  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RUNNER = os.path.join(ROOT, 'site_scons', 'hk_runtests.py')

PASSING = 'print("Suite: s"); print("  Test: fine ...passed"); print("3 passed, 0 failed, 1 skipped")'
FAILING = ('print("Suite: s"); print("  Test: fine ...passed"); '
           'print("  Test: broken one ...FAILED"); '
           'print("    1. tests/x/t.c:42  - CU_ASSERT_EQUAL(a,b)"); '
           'print("  matrix.saxpy.host.null-x   FAIL   gave OK"); '
           'print("after the failure"); print("WARNING: ThreadSanitizer: data race (pid=7)"); '
           'print("1 passed, 2 failed, 0 skipped"); '
           'raise SystemExit(1)')
SILENT = 'import sys; print("started"); print("last words"); sys.exit(-11 & 0xff)'
ENVCHECK = ('import os; print("trace=%r" % os.environ.get("HK_TRACE")); '
            'print("mine=%s" % os.environ.get("MINE")); print("1 passed, 0 failed, 0 skipped")')


class Runner(unittest.TestCase):
    def run_manifest(self, programs, extra_env=None):
        runs = [{'name': name, 'argv': [sys.executable, '-c', code], 'env': env or {}}
                for name, code, env in programs]
        with tempfile.NamedTemporaryFile('w', suffix='.json', delete=False) as f:
            json.dump(runs, f)
        try:
            env = dict(os.environ, **(extra_env or {}))
            p = subprocess.run([sys.executable, RUNNER, f.name], stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, env=env)
        finally:
            os.unlink(f.name)
        return p.returncode, p.stdout.splitlines()

    def test_counts_summed(self):
        rc, out = self.run_manifest([('a', PASSING, None), ('b', PASSING, None)])
        self.assertEqual(rc, 0)
        self.assertEqual(out[-1], 'total: 6 passed, 0 failed, 2 skipped')
        self.assertNotIn('what failed', '\n'.join(out))

    def test_failure_repeated_above_the_total(self):
        rc, out = self.run_manifest([('bad', FAILING, None), ('good', PASSING, None)])
        self.assertEqual(rc, 1)
        self.assertEqual(out[-1], 'total: 4 passed, 2 failed, 1 skipped')
        self.assertEqual(out[-2], 'failing programs: bad')
        tail = out[out.index('---- bad: what failed'):]
        # after every program's own output, and only the failure lines
        self.assertGreater(out.index('---- bad: what failed'),
                           max(i for i, l in enumerate(out) if l.startswith('==== ')))
        self.assertEqual(tail[1:4], ['  Test: broken one ...FAILED',
                                     '    1. tests/x/t.c:42  - CU_ASSERT_EQUAL(a,b)',
                                     '  matrix.saxpy.host.null-x   FAIL   gave OK'])
        self.assertIn('WARNING: ThreadSanitizer: data race (pid=7)', tail)
        self.assertNotIn('after the failure', tail)
        self.assertNotIn('  Test: fine ...passed', tail)

    def test_silent_program_counts_as_failed_with_its_last_lines(self):
        rc, out = self.run_manifest([('crash', SILENT, None), ('good', PASSING, None)])
        self.assertEqual(rc, 1)
        self.assertEqual(out[-1], 'total: 3 passed, 1 failed, 1 skipped')
        tail = out[out.index('---- crash: what failed'):]
        self.assertIn('started', tail)
        self.assertIn('last words', tail)

    def test_nothing_passed_is_a_failure(self):
        rc, out = self.run_manifest([('empty', 'print("0 passed, 0 failed, 4 skipped")', None)])
        self.assertEqual(rc, 1)
        self.assertEqual(out[-1], 'total: 0 passed, 0 failed, 4 skipped')

    def test_trace_switch_cleared_and_run_env_given(self):
        rc, out = self.run_manifest([('env', ENVCHECK, {'MINE': 'yes'})],
                                    extra_env={'HK_TRACE': '3', 'HK_TRACE_FILE': '/dev/null'})
        self.assertEqual(rc, 0)
        self.assertIn('trace=None', out)
        self.assertIn('mine=yes', out)


def main():
    result = hk_unittest.run(unittest.defaultTestLoader.loadTestsFromTestCase(Runner))
    status = hk_unittest.summary(result)
    return status if result.testsRun > 0 else 1


if __name__ == '__main__':
    sys.exit(main())
