#!/usr/bin/env python3
"""Compare two hk-bench CSV files and flag the ratios that got worse.

usage: bench/compare.py OLD.csv NEW.csv [--tolerance PCT] [--tolerance FIGURE=PCT]...

Rows are matched by (id, op, prec, n), and their `ratio` columns compared
(hk-bench's figures are ratios of two things measured side by side, so most
of a machine's noise cancels in them). A row's direction comes from its
target: ">=" means higher is better, "<=" lower is better; a row without a
target ("-") is read by its unit: a time (ns, us, ms, s) is better lower,
anything else (GB/s, calls/s) higher.

Run-to-run spread: figures move by a few percent between runs of the same
build on the same kind of machine, so a change is only called a change when
it is larger than the tolerance of its figure, a relative change of the
ratio: WORSE when new < old * (1 - tol) for higher-is-better rows, or new >
old * (1 + tol) for lower-is-better ones; BETTER the other way; "same"
within. The default tolerance is 5 % for every figure but two. P4 (handle
creation and destruction times), whose runs on machines of one kind spread
far wider (docs/bench/NOTES.md: create 12.1 - 20.8 us, first create 0.86 -
1.58 ms), gets 50 %. P8's ratios are a call's time while a swap runs over
its time while none runs: 25 % for p50 and p99, and 100 % for the tails
(p99.9/..., max/..., other-max/...), which a few slow calls among hundreds
of thousands set; both are chosen, not yet measured from repeated runs.
`--tolerance PCT` sets it for all figures and rows, `--tolerance P2=10` for
every row of one figure (later options win).

Prints one line per row of either file, then
  summary: N compared: N worse, N better, N same; N only in OLD, N only in NEW, N without a ratio
Exit status: 0 no row worse, 1 at least one row worse, 2 bad usage or a file
that is not an hk-bench CSV (the reason on stderr, on one line).
Standard library only.
"""
import csv
import math
import re
import signal
import sys

DEFAULT_TOLERANCE = 5.0  # percent, for every figure without its own below
# Creation times and P8's call times: see the spread above. 'P8:tail' is the
# tolerance of P8's rows that TAIL_ROW matches.
FIGURE_TOLERANCE = {'P4': 50.0, 'P8': 25.0, 'P8:tail': 100.0}
TAIL_ROW = re.compile(r'(p99\.9|max|other-max)/')
KEY = ('id', 'op', 'prec', 'n')
NEEDED = KEY + ('unit', 'ratio', 'target')
TIME_UNITS = {'ns', 'us', 'ms', 's'}


class Bad(Exception):
    """A usage error or a file that cannot be read as an hk-bench CSV."""


def parse_tolerances(specs):
    """['5', 'P2=10'] -> (default percent, {figure: percent})."""
    default, per = DEFAULT_TOLERANCE, dict(FIGURE_TOLERANCE)
    for spec in specs:
        fig, sep, pct = spec.rpartition('=')
        try:
            value = float(pct)
        except ValueError:
            value = -1.0
        if not math.isfinite(value) or value < 0 or (sep and not re.fullmatch(r'P\d+', fig)):
            raise Bad('--tolerance %s: expected PCT or FIGURE=PCT (e.g. 5 or P2=10)' % spec)
        if sep:
            per = {k: v for k, v in per.items() if not k.startswith(fig + ':')}
            per[fig] = value
        else:
            default = value
            per = {}  # a later global value overrides earlier per-figure ones
    return default, per


def read_rows(path):
    """{key: row} of one CSV file, in file order."""
    try:
        with open(path, newline='') as f:
            reader = csv.DictReader(f)
            missing = [c for c in NEEDED if c not in (reader.fieldnames or [])]
            if missing:
                raise Bad('%s: not an hk-bench CSV: no column %s' % (path, ', '.join(missing)))
            rows = {}
            for line, row in enumerate(reader, start=2):
                key = tuple(row[k] for k in KEY)
                if key in rows:
                    raise Bad('%s:%d: row %s appears twice' % (path, line, '/'.join(key)))
                rows[key] = row
            return rows
    except OSError as e:
        raise Bad('%s: %s' % (path, e.strerror or e))
    except (csv.Error, UnicodeDecodeError) as e:
        raise Bad('%s: not a CSV file: %s' % (path, e))


def ratio_of(row):
    """The row's ratio as a positive finite number, or None."""
    try:
        v = float(row['ratio'])
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) and v > 0 else None


def tolerance_of(key, default, per):
    """The tolerance of the row (id, op, prec, n) in percent."""
    fig = key[0]
    if fig + ':tail' in per and TAIL_ROW.match(key[1]):
        return per[fig + ':tail']
    return per.get(fig, default)


def higher_is_better(row):
    target = (row.get('target') or '').strip()
    if target.startswith('>='):
        return True
    if target.startswith('<='):
        return False
    return row.get('unit', '').strip() not in TIME_UNITS


def verdict(old, new, higher, tol):
    """'WORSE', 'BETTER' or 'same' for a move from old to new."""
    lo, hi = old * (1 - tol / 100.0), old * (1 + tol / 100.0)
    if higher:
        return 'WORSE' if new < lo else 'BETTER' if new > hi else 'same'
    return 'WORSE' if new > hi else 'BETTER' if new < lo else 'same'


def compare(old_rows, new_rows, default, per, out):
    """Writes the table to out; returns the counts."""
    counts = dict(compared=0, worse=0, better=0, same=0, only_old=0, only_new=0, no_ratio=0)
    out.write('%-3s %-10s %-4s %-5s %10s %10s %8s %5s  %s\n'
              % ('id', 'op', 'prec', 'n', 'old', 'new', 'change', 'tol', 'verdict'))
    keys = list(old_rows) + [k for k in new_rows if k not in old_rows]
    for key in keys:
        label = '%-3s %-10s %-4s %-5s' % key
        o, n = old_rows.get(key), new_rows.get(key)
        if n is None:
            counts['only_old'] += 1
            out.write('%s %10s %10s %8s %5s  only in OLD\n' % (label, o['ratio'], '-', '', ''))
            continue
        if o is None:
            counts['only_new'] += 1
            out.write('%s %10s %10s %8s %5s  only in NEW\n' % (label, '-', n['ratio'], '', ''))
            continue
        ro, rn = ratio_of(o), ratio_of(n)
        if ro is None or rn is None:
            counts['no_ratio'] += 1
            out.write('%s %10s %10s %8s %5s  no ratio\n'
                      % (label, o['ratio'] or '-', n['ratio'] or '-', '', ''))
            continue
        tol = tolerance_of(key, default, per)
        v = verdict(ro, rn, higher_is_better(n), tol)
        counts['compared'] += 1
        counts[v.lower()] += 1
        out.write('%s %10.4g %10.4g %+7.1f%% %4g%%  %s\n'
                  % (label, ro, rn, (rn / ro - 1) * 100, tol, v))
    out.write('summary: %(compared)d compared: %(worse)d worse, %(better)d better, %(same)d same; '
              '%(only_old)d only in OLD, %(only_new)d only in NEW, %(no_ratio)d without a ratio\n'
              % counts)
    return counts


def main(argv):
    files, specs = [], []
    i = 0
    try:
        while i < len(argv):
            a = argv[i]
            if a in ('-h', '--help'):
                print(__doc__.strip())
                return 0
            if a == '--tolerance' or a.startswith('--tolerance='):
                if '=' in a and a.startswith('--tolerance='):
                    specs.append(a.split('=', 1)[1])
                elif i + 1 < len(argv):
                    i += 1
                    specs.append(argv[i])
                else:
                    raise Bad('--tolerance needs a value')
            elif a.startswith('-') and a != '-':
                raise Bad('unknown option %s' % a)
            else:
                files.append(a)
            i += 1
        if len(files) != 2:
            raise Bad('expected OLD.csv NEW.csv (see --help)')
        default, per = parse_tolerances(specs)
        old_rows, new_rows = read_rows(files[0]), read_rows(files[1])
    except Bad as e:
        print('compare.py: %s' % e, file=sys.stderr)
        return 2
    counts = compare(old_rows, new_rows, default, per, sys.stdout)
    return 1 if counts['worse'] else 0


if __name__ == '__main__':
    # `compare.py A B | head` ends quietly, as a C program would.
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    sys.exit(main(sys.argv[1:]))
