#!/usr/bin/env python3
"""The Python suite run from the wheel, in a fresh venv.

usage: wheel_venv.py WHEEL VENV MODULE...
Makes VENV anew (python3 -m venv, with the system's site packages for NumPy),
installs WHEEL into it with pip from that file alone (--no-index), and runs
run.py with the venv's interpreter on MODULE...: the package is then the
installed one (HK_TEST_INSTALLED=1), with no HK_LOADER_LIBRARY and no
LD_LIBRARY_PATH, from a working directory outside the sources. Its output
and exit status are run.py's ("N passed, N failed, N skipped").
"""
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def main(argv):
    wheel, venv, modules = os.path.abspath(argv[0]), os.path.abspath(argv[1]), argv[2:]
    shutil.rmtree(venv, ignore_errors=True)
    env = {k: v for k, v in os.environ.items()
           if k not in ('HK_LOADER_LIBRARY', 'LD_LIBRARY_PATH', 'PYTHONPATH', 'PKG_CONFIG_PATH',
                        'HK_PLUGIN_PATH', 'PIP_INDEX_URL', 'PIP_FIND_LINKS')}
    # venv and pip run without a sanitizer build's preloaded runtimes.
    plain = {k: v for k, v in env.items() if k not in ('LD_PRELOAD', 'ASAN_OPTIONS',
                                                         'LSAN_OPTIONS', 'TSAN_OPTIONS')}
    for argv_ in ([sys.executable, '-m', 'venv', '--system-site-packages', venv],
                  [os.path.join(venv, 'bin', 'python'), '-m', 'pip', 'install', '-q',
                   '--no-index', '--no-deps', '--disable-pip-version-check', wheel]):
        proc = subprocess.run(argv_, env=plain, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True)
        if proc.returncode != 0:
            print(proc.stdout)
            print('%s exited %d' % (' '.join(argv_), proc.returncode))
            print('0 passed, 1 failed, 0 skipped')
            return 1
    env.update(HK_TEST_INSTALLED='1', HK_TEST_WHEEL=wheel, HK_TEST_VENV=venv,
               PATH=os.path.join(venv, 'bin') + os.pathsep + env.get('PATH', ''))
    return subprocess.call([os.path.join(venv, 'bin', 'python'), os.path.join(HERE, 'run.py')]
                           + modules, env=env, cwd=venv)


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
