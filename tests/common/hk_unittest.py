"""The end of every handlekit test script in Python: the module's tests run
verbosely, then the line "N passed, N failed, N skipped" that `scons test`
reads, as the C programs' runner prints it (tests/common/hk_test.h).

A script finds this file with
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                    '..', 'common'))
"""
import sys
import unittest


def summary(result):
    """Prints result's counts line; returns the exit status: 0 when no test
    failed or broke, else 1."""
    failed = len(result.failures) + len(result.errors)
    skipped = len(result.skipped)
    passed = result.testsRun - failed - skipped
    print('%d passed, %d failed, %d skipped' % (passed, failed, skipped))
    return 0 if failed == 0 else 1


def run(suite):
    """Runs suite verbosely on stdout; returns the unittest result."""
    return unittest.TextTestRunner(stream=sys.stdout, verbosity=2).run(suite)


def run_module(module):
    """Runs every test of module and prints the counts; returns the exit
    status (see summary)."""
    return summary(run(unittest.defaultTestLoader.loadTestsFromModule(module)))
