"""tools/setup.sh (which installs, among the rest, NumPy for these tests)
when another process holds the apt or dpkg lock: it says so, waits and
tries again, and gives up after HK_SETUP_LOCK_WAIT seconds. Runs the script
with stand-ins for apt-get, dpkg-query, id and sleep first on PATH, so
nothing is installed and no time passes."""
import os
import subprocess
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SETUP = os.path.join(ROOT, 'tools', 'setup.sh')

LOCKED = ('E: Could not get lock /var/lib/dpkg/lock-frontend. It is held by process 4242 '
          '(unattended-upgr)\nE: Unable to acquire the dpkg frontend lock '
          '(/var/lib/dpkg/lock-frontend), is another process using it?')

STUBS = {
    # Every package is missing, so the script installs.
    'dpkg-query': 'exit 1',
    'id': 'echo 0',
    'sleep': 'echo "$1" >>"$STUB_LOG/sleep"',
    'nvcc': 'exit 0',
    # Fails with apt's lock message while $STUB_LOG/locked-calls says so,
    # then with $STUB_FAIL when set, else succeeds; logs every call.
    'apt-get': '''echo "$*" >>"$STUB_LOG/apt-get"
n=$(cat "$STUB_LOG/locked-calls")
if [ "$n" -gt 0 ]; then
    echo $((n - 1)) >"$STUB_LOG/locked-calls"; echo "$STUB_LOCKED" >&2; exit 100
fi
if [ -n "${STUB_FAIL:-}" ]; then echo "$STUB_FAIL" >&2; exit 100; fi
exit 0''',
}


class SetupWaitsForTheLock(unittest.TestCase):
    def run_setup(self, locked_calls, **env):
        self.tmp = tempfile.TemporaryDirectory()
        d = self.tmp.name
        bindir = os.path.join(d, 'bin')
        os.makedirs(bindir)
        for name, body in STUBS.items():
            path = os.path.join(bindir, name)
            with open(path, 'w') as f:
                f.write('#!/bin/sh\n' + body + '\n')
            os.chmod(path, 0o755)
        with open(os.path.join(d, 'locked-calls'), 'w') as f:
            f.write('%d\n' % locked_calls)
        full = dict(os.environ, PATH=bindir + ':' + os.environ.get('PATH', '/usr/bin:/bin'),
                    STUB_LOG=d, STUB_LOCKED=LOCKED, CUDA_HOME=d)
        full.pop('HK_SETUP_LOCK_WAIT', None)
        # A sanitizer build's runtime, preloaded for the package's libraries,
        # is nothing the shell and its tools can run under (TSan's crashes them).
        full.pop('LD_PRELOAD', None)
        full.update(env)
        p = subprocess.run(['bash', SETUP], env=full, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, timeout=60)
        self.addCleanup(self.tmp.cleanup)
        return p

    def log(self, name):
        path = os.path.join(self.tmp.name, name)
        if not os.path.exists(path):
            return []
        with open(path) as f:
            return f.read().splitlines()

    def test_waits_then_installs(self):
        p = self.run_setup(3)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stderr.count('waiting for it (up to 300s)'), 1, p.stderr)
        calls = self.log('apt-get')
        self.assertEqual(len(calls), 5, calls)  # 3 refused updates, the update, the install
        self.assertTrue(calls[3].startswith('update'), calls)
        self.assertTrue(calls[4].startswith('install'), calls)
        self.assertIn('python3-numpy', calls[4])
        self.assertEqual(len(self.log('sleep')), 3)

    def test_gives_up_after_the_limit(self):
        p = self.run_setup(1000, HK_SETUP_LOCK_WAIT='12')
        self.assertNotEqual(p.returncode, 0)
        self.assertIn('gave up after 15s', p.stderr)
        self.assertIn('Could not get lock', p.stderr)
        self.assertEqual(len(self.log('sleep')), 3)
        self.assertEqual(len(self.log('apt-get')), 4)

    def test_other_failures_do_not_wait(self):
        p = self.run_setup(0, STUB_FAIL='E: Unable to locate package scons')
        self.assertNotEqual(p.returncode, 0)
        self.assertIn('Unable to locate package', p.stderr)
        self.assertNotIn('waiting', p.stderr)
        self.assertEqual(self.log('sleep'), [])

    def test_bad_limit(self):
        p = self.run_setup(0, HK_SETUP_LOCK_WAIT='5m')
        self.assertEqual(p.returncode, 2)
        self.assertIn('HK_SETUP_LOCK_WAIT', p.stderr)
