"""The package as the wheel installs it into a fresh venv (wheel_venv.py runs
this there; skipped elsewhere): the loader, plugins, hk-probe, programs and
libltdl it carries are the ones used, with nothing set in the environment;
the console scripts run the bundled programs; hk-cuda loads without a driver
and says so; the trust rule still refuses a plugin directory others may
write; every native file needs only what the wheel or the C library gives;
`auditwheel show` names a manylinux tag it meets."""
import os
import re
import shutil
import subprocess
import unittest

VENV = os.environ.get('HK_TEST_VENV')
WHEEL = os.environ.get('HK_TEST_WHEEL')
# What a bare system gives every program: the C library's own files.
SYSTEM = {'libc.so.6', 'libm.so.6', 'libdl.so.2', 'libpthread.so.0', 'librt.so.1',
          'ld-linux-x86-64.so.2', 'ld-linux-aarch64.so.1'}
# A sanitizer build's files need its runtime too (python/SConscript says which
# build this is): such a wheel is for the tests, never to ship.
SANITIZED = bool(os.environ.get('HK_TEST_SANITIZED'))
RUNTIME = re.compile(r'^lib(asan|ubsan|tsan|lsan|gcc_s|stdc\+\+)\.so\.\d+$')


def run(argv, env=None):
    proc = subprocess.run(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, errors='replace')
    return proc.returncode, proc.stdout


@unittest.skipUnless(VENV and WHEEL, 'not run from the wheel (python/tests/wheel_venv.py)')
class Wheel(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        import handlekit
        cls.hk = handlekit
        cls.pkg = os.path.dirname(os.path.realpath(handlekit.__file__))
        cls.kit = os.path.join(cls.pkg, '_kit')
        cls.plugdir = os.path.join(cls.kit, 'lib', 'handlekit', 'plugins')

    def test_package_and_loader_are_the_wheel_s(self):
        self.assertTrue(self.pkg.startswith(os.path.realpath(VENV) + os.sep), self.pkg)
        self.assertNotIn('HK_LOADER_LIBRARY', os.environ)
        from handlekit import _lib
        self.assertEqual(os.path.realpath(_lib.lib()._name),
                         os.path.join(self.kit, 'lib', 'libhkloader.so.1'))

    def test_load_hk_cpu(self):
        p = self.hk.load('hk-cpu')
        self.assertEqual(p.path, os.path.join(self.plugdir, 'hk-cpu.so'))
        import numpy as np
        x = np.arange(4, dtype=np.float32)
        y = np.ones(4, dtype=np.float32)
        with p.handle() as h:
            h.axpy(2.0, x, y)
        self.assertEqual(y.tolist(), [1.0, 3.0, 5.0, 7.0])
        self.assertEqual([r.reason for r in self.hk.reports() if r.reason], [])

    def need_hk_cuda(self, simulated=False):
        if not os.path.exists(os.path.join(self.plugdir, 'hk-cuda.so')):
            self.skipTest('hk-cuda is not built (no nvcc), so the wheel has none')
        sim = os.path.join(self.kit, 'lib', 'handlekit', 'simcuda', 'libcuda.so.1')
        if simulated and not os.path.exists(sim):
            self.skipTest('the simulated driver is not built (no cuda.h)')

    def test_hk_cuda_loads_and_reports_no_driver(self):
        self.need_hk_cuda()
        p = self.hk.load('hk-cuda')
        self.assertEqual(p.path, os.path.join(self.plugdir, 'hk-cuda.so'))
        with self.assertRaises(self.hk.HandlekitError) as cm:
            p.handle()
        self.assertEqual(cm.exception.status.name, 'NO_DRIVER', cm.exception.reason)

    def test_console_scripts_run_the_bundled_programs(self):
        for name in ('hk-host', 'hk-validate'):
            self.assertEqual(shutil.which(name), os.path.join(VENV, 'bin', name))
        rc, out = run(['hk-host', 'list'])
        self.assertEqual(rc, 0, out)
        self.assertIn(os.path.join(self.plugdir, 'hk-cpu.so'), out)
        self.assertNotIn('refused', out)
        rc, out = run(['hk-host', 'run', '-n', '1000'])
        self.assertEqual(rc, 0, out)
        self.assertTrue(out.startswith('plugin: hk-cpu 1.0.0 (hk-cuda is unusable: NO_DRIVER'),
                        out)
        rc, out = run(['hk-host', 'validate', 'hk-cpu', '--only', 'negotiate.'])
        self.assertEqual(rc, 0, out)
        self.assertRegex(out, r'\n[1-9]\d* passed, 0 failed, 0 skipped\n')

    def test_hk_validate_simulate_on_the_bundled_hk_cuda(self):
        self.need_hk_cuda(simulated=True)
        rc, out = run(['hk-validate', '--simulate=2', '--only', 'cuda.current-unchanged',
                       os.path.join(self.plugdir, 'hk-cuda.so')])
        self.assertEqual(rc, 0, out)
        self.assertIn('simulated CUDA driver %s/lib/handlekit/simcuda/libcuda.so.1, 2 devices'
                      % self.kit, out)
        self.assertIn('\n3 passed, 0 failed, 0 skipped', out)

    def test_a_plugin_directory_others_may_write_is_refused(self):
        mode = os.stat(self.plugdir).st_mode & 0o7777
        os.chmod(self.plugdir, 0o777)
        try:
            rc, out = run(['hk-host', 'list'])
        finally:
            os.chmod(self.plugdir, mode)
        self.assertIn('%s: scan: directory is writable by others (mode 0777)' % self.plugdir, out)
        self.assertNotIn('* hk-cpu', out)

    def elf_files(self):
        for top, _, names in os.walk(self.kit):
            for n in names:
                path = os.path.join(top, n)
                with open(path, 'rb') as f:
                    if f.read(4) == b'\x7fELF':
                        yield path

    def test_native_files_need_only_the_wheel_and_the_c_library(self):
        bundled = {n for p in self.elf_files() for n in [os.path.basename(p)]}
        wrong = []
        for path in self.elf_files():
            rc, dyn = run(['readelf', '-d', path])
            self.assertEqual(rc, 0, dyn)
            for need in re.findall(r'\(NEEDED\).*\[(.*)\]', dyn):
                if need not in SYSTEM and need not in bundled and \
                        not (SANITIZED and RUNTIME.match(need)):
                    wrong.append('%s needs %s' % (path, need))
        self.assertEqual(wrong, [])
        # and the dynamic linker finds the wheel's copies, through the RPATHs
        for path in self.elf_files():
            rc, out = run(['ldd', path])
            for name, where in re.findall(r'^\s*(\S+) => (\S+)', out, re.M):
                if name in bundled and not os.path.realpath(where).startswith(self.kit + os.sep):
                    wrong.append('%s finds %s at %s' % (path, name, where))
        self.assertEqual(wrong, [])
        rc, dyn = run(['readelf', '-d', os.path.join(self.kit, 'lib', 'libhkloader.so.1')])
        self.assertIn('[libltdl.so.7]', dyn)
        self.assertIn('runpath: [$ORIGIN]', dyn)

    def test_auditwheel_names_a_manylinux_tag(self):
        if SANITIZED:
            self.skipTest('a sanitizer build: its files link the sanitizer runtime, which no '
                          'manylinux policy allows (the plain build checks this)')
        tool = os.environ.get('HK_TEST_AUDITWHEEL') or shutil.which('auditwheel')
        if not tool or not os.access(tool, os.X_OK):
            self.skipTest('auditwheel is not installed (tools/setup.sh installs it)')
        rc, out = run([tool, 'show', WHEEL])
        self.assertEqual(rc, 0, out)
        self.assertRegex(' '.join(out.split()),
                         r'is consistent with the following platform tag: '
                         r'"manylinux_2_\d+_[a-z0-9_]+"', out)
