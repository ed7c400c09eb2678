#!/usr/bin/env python3
"""Runs python/tests with unittest and ends with "N passed, N failed, N skipped".

usage: run.py [MODULE ...]   (default: every test_*.py here)
The package is imported from python/ beside this folder, or, with
HK_TEST_INSTALLED=1, as the interpreter finds it (a venv the wheel was
installed into). Exits 1 when a test failed or none ran.
"""
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))


def _test_id(test):
    # A failing subtest is reported as a _SubTest whose test_case is the test.
    return getattr(test, 'test_case', test).id()


def main(argv):
    if os.environ.get('HK_TEST_INSTALLED') != '1':
        sys.path.insert(0, os.path.dirname(HERE))
    sys.path.insert(0, HERE)
    loader = unittest.defaultTestLoader
    if argv:
        suite = unittest.TestSuite(loader.loadTestsFromName(m) for m in argv)
    else:
        suite = loader.discover(HERE, pattern='test_*.py', top_level_dir=HERE)
    result = unittest.TextTestRunner(stream=sys.stdout, verbosity=2).run(suite)
    # A test with several failing subtests is one failed test.
    failed = len({_test_id(t) for t, _ in result.failures + result.errors}
                 | {_test_id(t) for t in result.unexpectedSuccesses})
    skipped = len(result.skipped)
    passed = result.testsRun - failed - skipped
    print('%d passed, %d failed, %d skipped' % (passed, failed, skipped))
    return 0 if failed == 0 and result.testsRun > 0 else 1


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
