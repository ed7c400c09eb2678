#!/usr/bin/env python3
"""examples/hk-example built as a project outside handlekit builds it.

The build stages its install under <build>/stage; this script builds the
example with its own Makefile in a directory of the build tree (not inside
the example's sources), finding handlekit only through the staged
pkg-config files, then checks the plugin it made:

  build     make succeeds (nvcc for the kernels, the staged libhkkit.a linked)
  exports   the plugin exports hk_plugin_negotiate only (the kit's names stay
            hidden) and needs neither libcuda nor libcudart
  validate  the staged hk-validate on the plugin, over the simulated driver:
            no check fails
  selfcheck in that report, the example's hk.selfcheck/1 passes
            selfcheck.table, .run, .threads and .cuda-current (run, not
            skipped); .agrees
            is skipped, saying why: the example offers no hk.blas1/1
  check     the example's `make check`: fails, saying it checked nothing,
            without a driver; passes over the simulated driver
  demo      the example's host, on the staged loader, over the simulated
            driver: every value right
  swap      the staged hk-host swaps the example between two builds (1.0.0,
            1.0.1) under 8 threads running its self-check through pins: 100
            swaps, no wrong or failed call, the old build closed

It prints hk-validate's report and ends with one line "N passed, N failed,
N skipped": hk-validate's own counts plus these steps.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys

COUNT = re.compile(r'^(\d+) passed, (\d+) failed, (\d+) skipped\s*$')


def staged(args, path):
    return os.path.join(args.stage, path.lstrip('/'))


def run(argv, env, cwd=None):
    """(exit status, output) of argv."""
    proc = subprocess.run(argv, env=env, cwd=cwd, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, errors='replace')
    return proc.returncode, proc.stdout


def clean_env(**extra):
    """The environment without anything that could point at another tree."""
    env = {k: v for k, v in os.environ.items()
           if k not in ('HK_PLUGIN_PATH', 'LD_LIBRARY_PATH', 'PKG_CONFIG_PATH',
                        'PKG_CONFIG_LIBDIR', 'HK_CUDA_DRIVER', 'CFLAGS', 'LDFLAGS')}
    env.update(extra)
    return env


class Steps:
    def __init__(self):
        self.passed = self.failed = self.skipped = 0

    def result(self, name, ok, detail=''):
        print('%-10s %s%s' % (name, 'PASS' if ok else 'FAIL', ('  ' + detail) if detail else ''))
        if ok:
            self.passed += 1
        else:
            self.failed += 1
        return ok

    def skip(self, name, why):
        print('%-10s SKIP  %s' % (name, why))
        self.skipped += 1


def make(args, work, extra=()):
    """(exit status, output) of the example's make in work (made anew)."""
    if os.path.isdir(work):
        shutil.rmtree(work)
    os.makedirs(work)
    pcdir = staged(args, os.path.join(args.libdir, 'pkgconfig'))
    cflags = ' '.join(['-O2', '-g'] + args.sanflags.split() + list(extra))
    env = clean_env(PKG_CONFIG_PATH=pcdir)
    argv = ['make', '-f', os.path.join(args.src, 'Makefile'), 'CC=' + args.cc,
            'CFLAGS=' + cflags, 'CUDA_HOME=' + args.cuda_home, 'NVCC=' + args.nvcc,
            'CUDA_ARCH=' + args.cuda_arch]
    return run(argv, env, cwd=work)


def build(args, steps):
    rc, out = make(args, args.work)
    if rc != 0:
        print(out)
    return steps.result('build', rc == 0, 'make in %s' % args.work)


def exports(args, steps):
    plugin = os.path.join(args.work, 'hk-example.so')
    rc, out = run(['nm', '-D', '--defined-only', plugin], clean_env())
    names = [line.split()[-1] for line in out.splitlines() if line.strip()]
    rc2, dyn = run(['readelf', '-d', plugin], clean_env())
    needed = re.findall(r'\(NEEDED\).*\[(.*)\]', dyn)
    bad = [n for n in needed if 'libcuda' in n or 'libhkkit' in n]
    ok = rc == 0 and rc2 == 0 and names == ['hk_plugin_negotiate'] and not bad
    return steps.result('exports', ok, 'exports %s; needs %s' % (' '.join(names) or 'nothing',
                                                                 ' '.join(needed)))


def sim_env(args, **extra):
    libdir = staged(args, args.libdir)
    return clean_env(LD_LIBRARY_PATH=os.path.dirname(args.sim) + ':' + libdir,
                     HK_CUDA_DRIVER=args.sim, SIMCUDA_DEVICES='2', **extra)


def validate(args, steps):
    """hk-validate's counts are added to the steps'; its own line is indented
    so that only the final line is read as this program's result. Checks of
    slots the example does not offer (hk.blas1/1: NOT-SUPPORTED, which
    hk-validate counts as skipped) are not counted as skipped here: they do
    not apply to it."""
    tool = staged(args, os.path.join(args.libdir, 'handlekit', 'bin', 'hk-validate'))
    rc, out = run([tool, os.path.join(args.work, 'hk-example.so')], sim_env(args))
    counts, notsup = None, 0
    for line in out.splitlines():
        m = COUNT.match(line.strip())
        if m:
            counts = [int(g) for g in m.groups()]
        n = re.match(r'^(\d+) not supported', line.strip())
        if n:
            notsup = int(n.group(1))
        print('  ' + line)
    if counts is None:
        return steps.result('validate', False, 'no result line; exit status %d' % rc)
    steps.passed += counts[0]
    steps.failed += counts[1]
    steps.skipped += counts[2] - notsup
    selfcheck(out, steps)
    return steps.result('validate', rc == 0 and counts[1] == 0,
                        'hk-validate: %d passed, %d failed, %d skipped (%d of them checks of '
                        'slots the example does not offer)' % tuple(counts + [notsup]))


def selfcheck(out, steps):
    """The example's self-check is what a live swap trusts: its checks must
    have run and passed, which a plugin without the table would not do (it
    is skipped there)."""
    rows = {}
    for line in out.splitlines():
        m = re.match(r'^(selfcheck\.\S+)\s+(\S+)\s*(.*)$', line)
        if m:
            rows[m.group(1)] = (m.group(2), m.group(3))
    want = {'selfcheck.table': 'PASS', 'selfcheck.run': 'PASS', 'selfcheck.threads': 'PASS',
            'selfcheck.cuda-current': 'PASS', 'selfcheck.agrees': 'SKIP'}
    wrong = ['%s %s' % (name, rows.get(name, ('(no row)',))[0])
             for name, verdict in sorted(want.items())
             if rows.get(name, ('',))[0] != verdict]
    agrees = rows.get('selfcheck.agrees', ('', ''))[1]
    if 'no table hk-validate can check on its own' not in agrees:
        wrong.append('selfcheck.agrees says "%s"' % agrees)
    return steps.result('selfcheck', not wrong,
                        'unexpected: ' + '; '.join(wrong) if wrong else
                        'table, run, threads and cuda-current pass; agrees skipped '
                        '(no hk.blas1/1)')


def make_check(args, steps):
    """The example's own `make check`: it fails, saying why, where nearly
    every check was skipped (no driver: no handle), and passes over the
    simulated driver."""
    pcdir = staged(args, os.path.join(args.libdir, 'pkgconfig'))
    argv = ['make', '-s', '-f', os.path.join(args.src, 'Makefile'), 'check',
            'CUDA_HOME=' + args.cuda_home, 'NVCC=' + args.nvcc, 'CUDA_ARCH=' + args.cuda_arch]
    rc, out = run(argv, clean_env(PKG_CONFIG_PATH=pcdir, HK_CUDA_DRIVER='/nonexistent/libcuda.so.1'),
                  cwd=args.work)
    verdict = [l for l in out.splitlines() if l.startswith('make check: ')]
    refused = rc != 0 and any('nothing of its CUDA code was checked' in l for l in verdict)
    if not refused:
        print(out[-2000:])
    rc2, out2 = run(argv, sim_env(args, PKG_CONFIG_PATH=pcdir), cwd=args.work)
    if rc2 != 0:
        print(out2[-2000:])
    return steps.result('check', refused and rc2 == 0,
                        'make check: exit %d without a driver (%s), %d over the simulated one'
                        % (rc, verdict[0] if verdict else 'no verdict', rc2))


def demo(args, steps):
    rc, out = run([os.path.join(args.work, 'hk-example-demo'),
                   os.path.join(args.work, 'hk-example.so'), '100000'], sim_env(args),
                  cwd=args.work)
    for line in out.splitlines():
        print('  ' + line)
    return steps.result('demo', rc == 0 and out.splitlines()[-1:] == ['ok'])


def swap(args, steps):
    """The staged hk-host swaps hk-example between two builds (1.0.0 and a
    second one answering 1.0.1) under 8 threads that run its self-check,
    and so its kernels, through movable handles: 100 swaps, no wrong or
    failed call, no refused swap, the old build's module closed."""
    work_b = args.work + '-b'
    rc, out = make(args, work_b, ['-DEX_VERSION=\'"1.0.1"\''])
    if rc != 0:
        print(out)
        return steps.result('swap', False, 'the second build failed')
    host = staged(args, os.path.join(args.libdir, 'handlekit', 'bin', 'hk-host'))
    rc, out = run([host, 'swap', '-p', os.path.join(args.work, 'hk-example.so'),
                   '-q', os.path.join(work_b, 'hk-example.so'), '-t', '8', '-k', '100'],
                  sim_env(args), cwd=args.work)
    for line in out.splitlines():
        print('  ' + line)
    want = ('hk-example 1.0.0', 'hk-example 1.0.1', 'its self-check (hk.selfcheck/1) through pins',
            'wrong 0, failed 0, swaps 100 of 100 (0 refused)', 'modules still open: 1 of 2')
    missing = [w for w in want if w not in out]
    return steps.result('swap', rc == 0 and not missing,
                        'exit status %d%s' % (rc, '; missing: ' + ', '.join(missing)
                                              if missing else ''))


def main():
    p = argparse.ArgumentParser()
    for opt in ('stage', 'libdir', 'src', 'work', 'cc', 'cuda-home', 'cuda-arch', 'nvcc',
                'sim', 'kit', 'sanflags'):
        p.add_argument('--' + opt, default='')
    args = p.parse_args()
    steps = Steps()
    why = ('no kit was built (no cuda.h)' if not args.kit else
           'no nvcc to compile the kernels' if not args.nvcc else
           'no simulated driver' if not args.sim else
           'make or pkg-config is not installed'
           if not (shutil.which('make') and shutil.which('pkg-config')) else '')
    if why:
        for name in ('build', 'exports', 'validate', 'selfcheck', 'check', 'demo', 'swap'):
            steps.skip(name, why)
    elif build(args, steps):
        exports(args, steps)
        validate(args, steps)
        make_check(args, steps)
        demo(args, steps)
        swap(args, steps)
    print('%d passed, %d failed, %d skipped' % (steps.passed, steps.failed, steps.skipped))
    return 1 if steps.failed else 0


if __name__ == '__main__':
    sys.exit(main())
