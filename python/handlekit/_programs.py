"""The console scripts of the handlekit wheel: hk-host and hk-validate.

Each replaces the Python process by the program of the same name that the
wheel carries (handlekit/_kit/lib/handlekit/bin), with the arguments as
given, so that its output, exit status and signals are the program's own.
The programs find the wheel's loader, plugins, hk-probe and simulated driver
relative to their own files, as in an installed tree.
"""
import os
import sys

BIN = os.path.join(os.path.dirname(os.path.abspath(__file__)), '_kit', 'lib', 'handlekit', 'bin')


def _exec(name):
    path = os.path.join(BIN, name)
    if not os.access(path, os.X_OK):
        sys.stderr.write('%s: this handlekit package carries no %s (it is installed from the '
                         'wheel only; use the one of your handlekit install)\n' % (name, path))
        return 1
    try:
        os.execv(path, [name] + sys.argv[1:])
    except OSError as e:
        sys.stderr.write('%s: cannot run %s: %s\n' % (name, path, e.strerror))
    return 1


def hk_host():
    return _exec('hk-host')


def hk_validate():
    return _exec('hk-validate')
