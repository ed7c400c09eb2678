#!/usr/bin/env python3
"""bench/compare.py on two small hk-bench CSV files (bench_old.csv,
bench_new.csv beside this file): which rows are worse, better or the same
under the default and given tolerances, the exit status, and the refusal of
bad input. Environment: HK_COMPARE (the script), HK_TEST_DATA (this
directory). Ends with "N passed, N failed, N skipped"."""
import os
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'common'))
import hk_unittest  # noqa: E402

COMPARE = os.environ.get('HK_COMPARE') or os.path.join(
    os.path.dirname(os.path.abspath(__file__)), '..', '..', 'bench', 'compare.py')
DATA = os.environ.get('HK_TEST_DATA') or os.path.dirname(os.path.abspath(__file__))
OLD = os.path.join(DATA, 'bench_old.csv')
NEW = os.path.join(DATA, 'bench_new.csv')


def compare(*args):
    p = subprocess.run([sys.executable, COMPARE] + list(args), stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True)
    return p.returncode, p.stdout, p.stderr


def verdicts(out):
    """{(id, op): verdict} from the table."""
    rows = {}
    for line in out.splitlines()[1:]:
        if line.startswith('summary:'):
            continue
        parts = line.split()
        rows[(parts[0], parts[1])] = ' '.join(parts[-3:]) if line.endswith(' OLD') or \
            line.endswith(' NEW') else ' '.join(parts[-2:]) if line.endswith('no ratio') \
            else parts[-1]
    return rows


class Compare(unittest.TestCase):
    def test_same_file_is_no_regression(self):
        rc, out, err = compare(OLD, OLD)
        self.assertEqual(rc, 0, err)
        self.assertIn('summary: 13 compared: 0 worse, 0 better, 13 same;', out)

    def test_default_tolerance_flags_worse_rows_and_exits_1(self):
        rc, out, err = compare(OLD, NEW)
        self.assertEqual(rc, 1, out + err)
        v = verdicts(out)
        self.assertEqual(v[('P1', 'axpy')], 'WORSE')     # higher is better: -7.5 %
        self.assertEqual(v[('P1', 'scal')], 'same')      # -2.1 %: within 5 %
        self.assertEqual(v[('P1', 'nrm2')], 'BETTER')    # +7.3 %
        self.assertEqual(v[('P2', 'axpy')], 'BETTER')    # lower is better: -10 %
        self.assertEqual(v[('P2', 'dot/dev')], 'WORSE')  # lower is better: +7.4 %
        self.assertEqual(v[('P3', 'axpy')], 'same')      # +1.5 %
        self.assertEqual(v[('P4', 'create')], 'same')    # +26 %: P4's spread is 50 %
        self.assertEqual(v[('P8', 'p50/service')], 'WORSE')    # +26 %: P8's is 25 %
        self.assertEqual(v[('P8', 'p99.9/service')], 'same')   # +28 %: its tails' 100 %
        self.assertEqual(v[('P8', 'max/flood')], 'same')       # -55 %
        self.assertEqual(v[('P8', 'switch/flood')], 'no ratio')
        self.assertIn('summary: 11 compared: 3 worse, 2 better, 6 same; 1 only in OLD, '
                      '1 only in NEW, 2 without a ratio', out)

    def test_rows_of_one_file_or_without_ratio_are_not_regressions(self):
        rc, out, _ = compare(OLD, NEW, '--tolerance', '30')
        self.assertEqual(rc, 0, out)
        v = verdicts(out)
        self.assertEqual(v[('P6', 'axpy')], 'only in OLD')
        self.assertEqual(v[('P6', 'dot')], 'only in NEW')
        self.assertEqual(v[('P5', 'axpy')], 'no ratio')

    def test_global_tolerance_covers_every_figure(self):
        rc, out, _ = compare(OLD, NEW, '--tolerance', '30')
        self.assertEqual(rc, 0, out)
        self.assertIn(' 0 worse,', out)
        rc, out, _ = compare(OLD, NEW, '--tolerance=7')  # P4 included
        self.assertEqual(rc, 1, out)
        v = verdicts(out)
        self.assertEqual(v[('P1', 'axpy')], 'WORSE')
        self.assertEqual(v[('P2', 'dot/dev')], 'WORSE')
        self.assertEqual(v[('P4', 'create')], 'WORSE')
        self.assertEqual(v[('P8', 'p99.9/service')], 'WORSE')  # the tails too
        self.assertIn(' 6 worse,', out)

    def test_per_figure_tolerance(self):
        rc, out, _ = compare(OLD, NEW, '--tolerance', 'P1=10')
        self.assertEqual(rc, 1, out)
        v = verdicts(out)
        self.assertEqual(v[('P1', 'axpy')], 'same')
        self.assertEqual(v[('P2', 'dot/dev')], 'WORSE')
        rc, out, _ = compare(OLD, NEW, '--tolerance', 'P1=10', '--tolerance', 'P2=10')
        self.assertEqual(rc, 1, out)  # P8's p50, +26 %
        rc, out, _ = compare(OLD, NEW, '--tolerance', 'P1=10', '--tolerance', 'P2=10',
                             '--tolerance', 'P8=30')
        self.assertEqual(rc, 0, out)

    def test_p8_figure_tolerance_covers_its_tails(self):
        # P8=27 replaces both of P8's tolerances: p50 +26 % is now within,
        # the tail's +28 % no longer is.
        rc, out, _ = compare(OLD, NEW, '--tolerance', 'P8=27')
        v = verdicts(out)
        self.assertEqual(v[('P8', 'p50/service')], 'same')
        self.assertEqual(v[('P8', 'p99.9/service')], 'WORSE')
        self.assertEqual(v[('P8', 'max/flood')], 'BETTER')  # -55 %, lower is better
        self.assertEqual(rc, 1)
        # "<=+100us" targets an extra time: lower is better, read the other way.
        rc, out, _ = compare(NEW, OLD, '--tolerance', 'P8=10')
        v = verdicts(out)
        self.assertEqual(v[('P8', 'p99.9/service')], 'BETTER')
        self.assertEqual(v[('P8', 'max/flood')], 'WORSE')

    def test_direction_from_target_or_unit(self):
        # P4 create has target <=20us; create0 none ("-") but unit us: both
        # lower-is-better, so a rise beyond 10 % is worse.
        rc, out, _ = compare(OLD, NEW, '--tolerance', 'P4=10')
        v = verdicts(out)
        self.assertEqual(v[('P4', 'create')], 'WORSE')
        self.assertEqual(v[('P4', 'create0')], 'WORSE')
        self.assertEqual(rc, 1)
        # The other way round the same moves are improvements.
        rc, out, _ = compare(NEW, OLD, '--tolerance', 'P4=10')
        v = verdicts(out)
        self.assertEqual(v[('P4', 'create')], 'BETTER')
        self.assertEqual(v[('P4', 'create0')], 'BETTER')

    def test_bad_input_exits_2_with_one_line(self):
        with tempfile.TemporaryDirectory() as tmp:
            notcsv = os.path.join(tmp, 'x.csv')
            with open(notcsv, 'w') as f:
                f.write('a,b\n1,2\n')
            dup = os.path.join(tmp, 'dup.csv')
            with open(OLD) as f:
                lines = f.readlines()
            with open(dup, 'w') as f:
                f.writelines(lines + lines[1:2])
            cases = [((OLD, NEW, '--tolerance', 'x'), '--tolerance x: expected PCT or FIGURE=PCT'),
                     ((OLD, NEW, '--tolerance', 'Q1=5'), '--tolerance Q1=5'),
                     ((OLD, NEW, '--tolerance', '-1'), '--tolerance -1'),
                     ((OLD, NEW, '--tolerance'), '--tolerance needs a value'),
                     ((OLD,), 'expected OLD.csv NEW.csv'),
                     ((OLD, NEW, '--frob'), 'unknown option --frob'),
                     ((OLD, os.path.join(tmp, 'none.csv')), 'No such file or directory'),
                     ((OLD, notcsv), 'not an hk-bench CSV: no column id, op, prec, n, unit'),
                     ((dup, NEW), 'row P4/create/-/- appears twice')]
            for args, want in cases:
                rc, out, err = compare(*args)
                self.assertEqual(rc, 2, args)
                self.assertEqual(out, '', args)
                self.assertEqual(len(err.splitlines()), 1, err)
                self.assertIn(want, err)


if __name__ == '__main__':
    sys.exit(hk_unittest.summary(hk_unittest.run(
        unittest.defaultTestLoader.loadTestsFromTestCase(Compare))))
