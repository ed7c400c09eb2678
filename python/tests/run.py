#!/usr/bin/env python3
"""Runs python/tests with unittest and ends with "N passed, N failed, N skipped".

usage: run.py [MODULE ...]   (default: every test_*.py here)
The package is imported from python/ beside this folder. Exits 1 when a test
failed or none ran.
"""
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))


def main(argv):
    sys.path.insert(0, os.path.dirname(HERE))
    sys.path.insert(0, HERE)
    loader = unittest.defaultTestLoader
    if argv:
        suite = unittest.TestSuite(loader.loadTestsFromName(m) for m in argv)
    else:
        suite = loader.discover(HERE, pattern='test_*.py', top_level_dir=HERE)
    result = unittest.TextTestRunner(stream=sys.stdout, verbosity=2).run(suite)
    failed = len(result.failures) + len(result.errors) + len(result.unexpectedSuccesses)
    skipped = len(result.skipped)
    passed = result.testsRun - failed - skipped
    print('%d passed, %d failed, %d skipped' % (passed, failed, skipped))
    return 0 if failed == 0 and result.testsRun > 0 else 1


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
