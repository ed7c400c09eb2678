#!/usr/bin/env python3
"""The client suite: real CUDA programs as users of hk-cuda (PyTorch, CuPy,
cuda-python's cuda.core, a plain CUDA runtime program), through the handlekit
package and through the raw ABI.

usage: run.py [--strict] [--ptx FILE] [--cudart PROGRAM --plugin PLUGIN.so]
              [--only TEXT]

Each case prints "PASS name", "FAIL name: why" or "skipped: name: why", then
a table and "N passed, N failed, N skipped"; exit status 1 when a case
failed. A case whose client library is not installed is skipped saying so;
with --strict (what tools/gpu-check.sh runs on a GPU machine) any other skip
counts as a failure, except a case that needs a second device on a machine
with one: a library that is there must be tested. --ptx: the PTX of
client_kernels.cu (the build makes it with nvcc); --cudart: the CUDA runtime
program cudart_client, run on --plugin.

The package is the one on PYTHONPATH (python/ of the repository); the
loader library is HK_LOADER_LIBRARY or the installed one, and it finds
hk-cuda as any host does.
"""
import argparse
import os
import re
import subprocess
import sys
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
ALLOWED_SKIPS = ('not installed', 'needs two devices')
COUNT = re.compile(r'^(\d+) passed, (\d+) failed, (\d+) skipped\s*$')


def python_cases(args):
    sys.path.insert(0, HERE)
    import case_cudacore
    import case_cupy
    import case_torch
    return case_torch.cases() + case_cupy.cases(args.ptx) + case_cudacore.cases()


def run_python(args, rows):
    from hkclient import Skip
    for name, fn in python_cases(args):
        if args.only and args.only not in name:
            continue
        try:
            fn()
            rows.append((name, 'PASS', ''))
        except Skip as e:
            rows.append((name, 'skip', str(e)))
        except Exception as e:  # a failed case: the rest still run
            where = traceback.extract_tb(e.__traceback__)[-1]
            rows.append((name, 'FAIL', '%s: %s (%s:%d)' % (type(e).__name__, e,
                                                            os.path.basename(where.filename),
                                                            where.lineno)))


def run_cudart(args, rows):
    if not args.cudart:
        rows.append(('cudart program', 'skip',
                     'no cudart_client given (the build makes it when nvcc is found; '
                     'run.py --cudart)'))
        return
    proc = subprocess.run([args.cudart, args.plugin or ''], stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, errors='replace')
    counted = False
    for line in proc.stdout.splitlines():
        if line.startswith('PASS '):
            rows.append((line[5:], 'PASS', ''))
        elif line.startswith('FAIL '):
            name, _, why = line[5:].partition(': ')
            rows.append((name, 'FAIL', why))
        elif line.startswith('skipped: '):
            name, _, why = line[9:].partition(': ')
            rows.append((name, 'skip', why))
        counted = counted or bool(COUNT.match(line))
    if not counted or proc.returncode not in (0, 1):
        rows.append(('cudart program', 'FAIL',
                     'exit status %d, output: %s' % (proc.returncode, proc.stdout[-300:])))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--strict', action='store_true')
    ap.add_argument('--ptx')
    ap.add_argument('--cudart')
    ap.add_argument('--plugin')
    ap.add_argument('--only')
    args = ap.parse_args()
    rows = []
    try:
        run_python(args, rows)
    except ImportError as e:  # the package itself is missing: every Python case fails
        rows.append(('handlekit package', 'FAIL', str(e)))
    if not args.only or 'cudart' in args.only:
        run_cudart(args, rows)
    if args.strict:
        rows = [(n, 'FAIL', 'skipped on a machine that should run it: ' + w)
                if r == 'skip' and not w.startswith(ALLOWED_SKIPS) else (n, r, w)
                for n, r, w in rows]
    counts = {'PASS': 0, 'FAIL': 0, 'skip': 0}
    for name, result, why in rows:
        counts[result] += 1
        if result == 'skip':
            print('skipped: %s: %s' % (name, why))
        else:
            print('%s %s%s' % (result, name, ': ' + why if why else ''))
    print()
    width = max([len(n) for n, _, _ in rows] + [4])
    print('%-*s  %s' % (width, 'case', 'result'))
    for name, result, why in rows:
        short = why if len(why) < 60 else why[:57] + '...'
        print('%-*s  %s%s' % (width, name, result, '  ' + short if short else ''))
    print('%d passed, %d failed, %d skipped' % (counts['PASS'], counts['FAIL'], counts['skip']))
    return 1 if counts['FAIL'] else 0


if __name__ == '__main__':
    sys.exit(main())
