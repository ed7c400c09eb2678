#!/usr/bin/env python3
"""The installed tree as a user gets it.

Two installs are checked:
- the build's staged install (<build>/stage, laid out as under DESTDIR with
  the configured directories): the files and links, the exported names, the
  relative paths of the pkg-config file, and the staged hk-host, which runs
  from wherever its tree lies;
- a fresh install to a prefix: `scons install prefix=P builddir=B` from the
  sources under umask 002, then B is deleted, and everything is built and run from P alone:
  examples/host-minimal with its Makefile (pkg-config) and with its
  CMakeLists.txt (find_package), each on the shared and the static loader,
  this folder's CMake project (the flat include form, the kit's target),
  and the installed hk-host. No installed file may name B. With the
  CUDA toolkit: the installed hk-validate --simulate on hk-cuda (and through
  hk-host validate) over the installed simulated driver, and
  examples/hk-example built with its Makefile, whose `make check` with no
  driver chosen checks the plugin's CUDA code (over the simulated driver
  where this machine has none) and whose `make demo` runs; a copy of the
  example broken on purpose fails hk-validate --simulate.
The README's C example must be examples/host-minimal/host.c.
Ends with "N passed, N failed, N skipped".
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'common'))
import hk_unittest  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ARGS = None
_DOT = sum((i % 7) * (2 * (i % 7) + 1) for i in range(1000))
RIGHT = ['saxpy: 0 of 1000 wrong', 'sdot: %d, expected %d' % (_DOT, _DOT), 'all results right']
COUNTS = re.compile(r'^(\d+) passed, (\d+) failed, (\d+) skipped$', re.M)


def staged(path):
    """The staged location of an installed absolute path."""
    return os.path.join(ARGS.stage, path.lstrip('/'))


def run(argv, env=None, cwd=None, umask=None):
    """Runs argv (under umask, when given); returns its output; fails the test
    with the output otherwise."""
    proc = subprocess.run(argv, env=env, cwd=cwd, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, errors='replace',
                          preexec_fn=None if umask is None else lambda: os.umask(umask))
    if proc.returncode != 0:
        raise AssertionError('%s exited %d:\n%s' % (' '.join(argv), proc.returncode, proc.stdout))
    return proc.stdout


def clean_env(**extra):
    """The environment without anything that could point at another tree."""
    env = {k: v for k, v in os.environ.items()
           if k not in ('HK_PLUGIN_PATH', 'LD_LIBRARY_PATH', 'PKG_CONFIG_PATH',
                        'PKG_CONFIG_LIBDIR', 'PKG_CONFIG_SYSROOT_DIR', 'CMAKE_PREFIX_PATH',
                        'DESTDIR', 'SCONSFLAGS', 'CFLAGS', 'LDFLAGS', 'HK_PLUGIN_PIN',
                        'HK_PLUGIN_EXCLUDE', 'HK_TRACE')}
    env['HK_CUDA_DRIVER'] = '/nonexistent/libcuda.so.1'  # hk-cuda must not touch a GPU
    env.update(extra)
    return env


def run_rc(argv, env=None, cwd=None):
    """Runs argv; returns (exit status, output)."""
    proc = subprocess.run(argv, env=env, cwd=cwd, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, errors='replace')
    return proc.returncode, proc.stdout


def has_loader_installed():
    """Whether the dynamic linker knows a libhkloader.so.1 here."""
    try:
        out = subprocess.run(['/sbin/ldconfig', '-p'], stdout=subprocess.PIPE, text=True).stdout
    except OSError:
        return False
    return 'libhkloader.so.1 ' in out


def has_cuda_driver():
    """Whether the dynamic linker knows a libcuda.so.1 here (a real driver)."""
    try:
        out = subprocess.run(['/sbin/ldconfig', '-p'], stdout=subprocess.PIPE, text=True).stdout
    except OSError:
        return False
    return 'libcuda.so.1 ' in out


def dynamic_symbols(lib):
    """Names of the defined dynamic symbols of a shared object (nm -D)."""
    out = run(['nm', '-D', '--defined-only', lib])
    return [line.split()[-1] for line in out.splitlines() if line.strip()]


class Staged(unittest.TestCase):
    def test_headers_public_only(self):
        inc = staged(os.path.join(ARGS.includedir, 'handlekit'))
        names = sorted(os.listdir(inc))
        src = sorted(n for n in os.listdir(os.path.join(ARGS.root, 'plugin_api'))
                     if n.startswith('hk_') and n.endswith('.h') and not n.startswith('hk__'))
        self.assertEqual(names, src)
        self.assertIn('hk_loader.h', names)

    def test_loader_files_and_links(self):
        lib = staged(ARGS.libdir)
        real = 'libhkloader.so.' + ARGS.version
        soname = 'libhkloader.so.' + ARGS.version.split('.')[0]
        self.assertTrue(os.path.isfile(os.path.join(lib, real)))
        self.assertFalse(os.path.islink(os.path.join(lib, real)))
        self.assertEqual(os.readlink(os.path.join(lib, soname)), real)
        self.assertEqual(os.readlink(os.path.join(lib, 'libhkloader.so')), soname)
        self.assertTrue(os.path.isfile(os.path.join(lib, 'libhkloader.a')))
        dyn = run(['readelf', '-d', os.path.join(lib, real)])
        self.assertIn('Library soname: [%s]' % soname, dyn)

    def test_plugins_programs_and_probe(self):
        plugdir = staged(os.path.join(ARGS.libdir, 'handlekit', 'plugins'))
        self.assertIn('hk-cpu.so', os.listdir(plugdir))
        progdir = staged(os.path.join(ARGS.libdir, 'handlekit', 'bin'))
        link = staged(os.path.join(ARGS.bindir, 'hk-host'))
        self.assertTrue(os.path.islink(link))
        self.assertEqual(os.path.realpath(link), os.path.realpath(os.path.join(progdir, 'hk-host')))
        probe = staged(os.path.join(ARGS.libexecdir, 'handlekit', 'hk-probe'))
        self.assertTrue(os.access(probe, os.X_OK), probe)
        self.assertNotIn('hk-probe', os.listdir(progdir))
        # the installed programs use the installed shared loader
        dyn = run(['readelf', '-d', os.path.join(progdir, 'hk-host')])
        self.assertIn('[libhkloader.so.%s]' % ARGS.version.split('.')[0], dyn)
        self.assertIn('[$ORIGIN/../..]', dyn)

    def test_only_public_symbols_exported(self):
        lib = staged(os.path.join(ARGS.libdir, 'libhkloader.so.' + ARGS.version))
        names = dynamic_symbols(lib)
        for name in ('hk_loader_create', 'hk_plugin_vtable', 'hk_loader_version',
                     'hk_status_name', 'hk_status_string'):
            self.assertIn(name, names)
        bad = [n for n in names if not re.match(r'^hk_[a-z0-9]', n)]
        self.assertEqual(bad, [], 'exported names other than public hk_*: %s' % bad)

    def test_pkgconfig_variables_point_into_the_stage(self):
        if not shutil.which('pkg-config'):
            self.skipTest('pkg-config is not installed (tools/setup.sh installs it)')
        env = clean_env(PKG_CONFIG_PATH=staged(os.path.join(ARGS.libdir, 'pkgconfig')))
        pc = lambda *a: run(['pkg-config'] + list(a) + ['handlekit'], env=env).strip()
        self.assertEqual(pc('--modversion'), ARGS.version)
        self.assertEqual(os.path.realpath(pc('--variable=plugindir')),
                         os.path.realpath(staged(os.path.join(ARGS.libdir, 'handlekit',
                                                              'plugins'))))
        self.assertEqual(os.path.realpath(pc('--variable=probe')),
                         os.path.realpath(staged(os.path.join(ARGS.libexecdir, 'handlekit',
                                                              'hk-probe'))))
        inc = os.path.realpath(staged(ARGS.includedir))
        self.assertEqual([os.path.realpath(f[2:]) for f in pc('--cflags').split()],
                         [inc, os.path.join(inc, 'handlekit')])

    def test_staged_hk_host_runs_where_it_lies(self):
        hk_host = staged(os.path.join(ARGS.bindir, 'hk-host'))
        plugdir = os.path.realpath(staged(os.path.join(ARGS.libdir, 'handlekit', 'plugins')))
        out = run([hk_host, 'list'], env=clean_env())
        self.assertIn(plugdir + '/hk-cpu.so', out)
        self.assertNotIn('refused', out)
        out = run([hk_host, 'run', '-n', '1000'], env=clean_env())
        self.assertTrue(out.startswith('plugin: hk-cpu'), out)


class Readme(unittest.TestCase):
    """The README's C example is the file built and run below, and shows
    what it prints."""

    def test_readme_shows_the_example(self):
        text = open(os.path.join(ARGS.root, 'README.md')).read()
        src = open(os.path.join(ARGS.root, 'examples', 'host-minimal', 'host.c')).read()
        self.assertIn(src, re.findall(r'^```c\n(.*?)^```$', text, re.S | re.M))
        for line in ['plugin: hk-cpu 1.0.0 ('] + RIGHT:
            self.assertIn('\n' + line, text)


class FreshInstall(unittest.TestCase):
    """scons install to a prefix from the sources, the build tree deleted."""

    @classmethod
    def setUpClass(cls):
        cls.why = None
        scons = shutil.which('scons')
        if not scons:
            cls.why = 'scons is not on PATH'
            return
        cls.work = os.path.abspath(ARGS.work)
        shutil.rmtree(cls.work, ignore_errors=True)
        os.makedirs(cls.work)
        cls.build = os.path.join(cls.work, 'build')
        cls.prefix = os.path.join(cls.work, 'prefix')
        # umask 002, as many systems give users: the build and the install
        # must still make nothing the group may write, or the loader refuses it.
        run([scons, '-Q', '-j2', 'builddir=' + cls.build, 'prefix=' + cls.prefix,
             'cuda_home=' + ARGS.cuda_home, 'install'], env=clean_env(), cwd=ARGS.root,
            umask=0o002)
        shutil.rmtree(cls.build)
        cls.plugdir = os.path.join(cls.prefix, 'lib', 'handlekit', 'plugins')
        cls.pcenv = clean_env(PKG_CONFIG_PATH=os.path.join(cls.prefix, 'lib', 'pkgconfig'))

    def setUp(self):
        if self.why:
            self.skipTest(self.why)

    def need(self, *tools):
        for tool in tools:
            if not shutil.which(tool):
                self.skipTest('%s is not installed (tools/setup.sh installs it)' % tool)

    def check_example(self, exe):
        out = run([exe], env=clean_env()).splitlines()
        self.assertEqual(out, ['plugin: hk-cpu 1.0.0 (%s/hk-cpu.so)' % self.plugdir] + RIGHT)

    def test_nothing_installed_names_the_build_tree(self):
        self.assertFalse(os.path.exists(self.build))
        named = []
        for top, _, files in os.walk(self.prefix):
            for f in files:
                path = os.path.join(top, f)
                if not os.path.islink(path) and self.build.encode() in open(path, 'rb').read():
                    named.append(path)
        self.assertEqual(named, [])

    def test_example_with_pkg_config(self):
        self.need('pkg-config', 'make')
        out = os.path.join(self.work, 'example-make')
        os.makedirs(out, exist_ok=True)
        makefile = os.path.join(ARGS.root, 'examples', 'host-minimal', 'Makefile')
        run(['make', '-f', makefile, 'CC=' + ARGS.cc], env=self.pcenv, cwd=out)
        self.check_example(os.path.join(out, 'host-minimal'))
        self.check_example(os.path.join(out, 'host-minimal-static'))
        self.assertIn('libhkloader.so.', run(['readelf', '-d', os.path.join(out, 'host-minimal')]))
        self.assertNotIn('libhkloader', run(['readelf', '-d',
                                             os.path.join(out, 'host-minimal-static')]))

    def test_example_and_kit_with_cmake(self):
        self.need('cmake')
        for name, src in (('example-cmake', os.path.join(ARGS.root, 'examples', 'host-minimal')),
                          ('check-cmake', HERE)):
            out = os.path.join(self.work, name)
            env = clean_env(CC=ARGS.cc)
            run(['cmake', '-S', src, '-B', out, '-DCMAKE_PREFIX_PATH=' + self.prefix,
                 '-DCMAKE_BUILD_TYPE=Release'], env=env)
            run(['cmake', '--build', out], env=env)
        # No LD_LIBRARY_PATH: CMake gives the build an rpath to the imported library.
        self.check_example(os.path.join(self.work, 'example-cmake', 'host-minimal'))
        self.check_example(os.path.join(self.work, 'example-cmake', 'host-minimal-static'))
        major, minor = ARGS.version.split('.')[:2]
        for exe in ('flat_shared', 'flat_static'):
            out = run([os.path.join(self.work, 'check-cmake', exe)], env=clean_env())
            self.assertEqual(out.splitlines(), ['loader %s ABI %s.0-%s.%s' % (ARGS.version, major,
                                                                             major, minor),
                                                'status 0: OK'])
        if os.path.exists(os.path.join(self.prefix, 'lib', 'libhkkit.a')):
            self.assertTrue(os.path.exists(os.path.join(self.work, 'check-cmake',
                                                        'libkit_user.so')))

    def test_installed_hk_host(self):
        hk_host = os.path.join(self.prefix, 'bin', 'hk-host')
        out = run([hk_host, 'list'], env=clean_env())
        self.assertIn(self.plugdir + '/hk-cpu.so', out)
        self.assertNotIn('refused', out)
        out = run([hk_host, 'run', '-n', '1000'], env=clean_env())
        self.assertTrue(out.startswith('plugin: hk-cpu 1.0.0 (hk-cuda is unusable: NO_DRIVER'),
                        out)
        self.assertIn('all results verified', out)

    def test_missing_probe_is_named(self):
        """Without its hk-probe the installed loader says where it looked."""
        self.need('pkg-config', 'make')
        probe = os.path.join(self.prefix, 'libexec', 'handlekit', 'hk-probe')
        exe = os.path.join(self.work, 'example-make', 'host-minimal-static')
        if not os.path.exists(exe):
            self.test_example_with_pkg_config()
        os.rename(probe, probe + '.away')
        try:
            proc = subprocess.run([exe], env=clean_env(), stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True)
        finally:
            os.rename(probe + '.away', probe)
        self.assertEqual(proc.returncode, 1, proc.stdout)
        self.assertIn('%s/hk-cpu.so: probe: LOAD_FAILED: no usable probe program: %s: no such '
                      'file' % (self.plugdir, probe), proc.stdout)

    def test_pip_install_of_the_sources_finds_the_prefix(self):
        """`pip install ./python` into a venv, against this install: the
        package asks pkg-config for handlekit's libdir (PKG_CONFIG_PATH, as
        for C) and loads the prefix's loader and plugins."""
        self.need('pkg-config')
        try:
            import setuptools  # noqa: F401  (pip builds the sources with it, offline)
        except ImportError:
            self.skipTest('setuptools is not installed for %s' % sys.executable)
        src = os.path.join(self.work, 'pysrc')
        venv = os.path.join(self.work, 'pyvenv')
        for d in (src, venv):
            shutil.rmtree(d, ignore_errors=True)
        shutil.copytree(os.path.join(ARGS.root, 'python'), src,
                        ignore=shutil.ignore_patterns('tests', 'build', '*.egg-info',
                                                      '__pycache__'))
        run([sys.executable, '-m', 'venv', '--system-site-packages', venv], env=clean_env())
        py = os.path.join(venv, 'bin', 'python')
        run([py, '-m', 'pip', 'install', '-q', '--no-index', '--no-deps', '--no-build-isolation',
             '--disable-pip-version-check', src], env=clean_env(), cwd=self.work)
        code = 'import handlekit; print(handlekit.load("hk-cpu").path)'
        out = run([py, '-c', code], env=self.pcenv, cwd=self.work)
        self.assertEqual(out.strip(), os.path.join(self.plugdir, 'hk-cpu.so'))
        if has_loader_installed():
            return  # the system's own loader would answer the second question
        rc, out = run_rc([py, '-c', code], env=clean_env(), cwd=self.work)
        self.assertNotEqual(rc, 0, out)
        self.assertIn('PKG_CONFIG_PATH', out)

    # ---- CUDA plugins checked without a GPU ----

    def simulated(self):
        """The installed simulated driver and hk-cuda, or a skip saying why."""
        sim = os.path.join(self.prefix, 'lib', 'handlekit', 'simcuda', 'libcuda.so.1')
        cuda = os.path.join(self.plugdir, 'hk-cuda.so')
        if not os.path.exists(os.path.join(ARGS.cuda_home, 'include', 'cuda.h')):
            self.skipTest('no cuda.h under %s: no simulated driver is built' % ARGS.cuda_home)
        self.assertTrue(os.path.isfile(sim), sim)
        if not os.path.exists(cuda):
            self.skipTest('hk-cuda is not built (no nvcc)')
        return sim, cuda

    def test_validate_simulate_on_hk_cuda(self):
        """hk-validate --simulate over the installed driver, whatever
        HK_CUDA_DRIVER says: every check of hk-cuda runs and passes."""
        self.simulated()
        tool = os.path.join(self.prefix, 'bin', 'hk-validate')
        rc, out = run_rc([tool, '--simulate', os.path.join(self.plugdir, 'hk-cuda.so')],
                         env=clean_env())
        counts = [int(x) for x in COUNTS.findall(out)[-1]]
        self.assertEqual((rc, counts[1]), (0, 0), out[-3000:])
        self.assertIn('\ndriver: opened\ndevices: 2\n', out)
        self.assertGreater(counts[0], 400, out[-3000:])
        self.assertLessEqual(counts[2], 10, out[-3000:])

    def test_hk_host_validate_passes_simulate(self):
        self.simulated()
        hk_host = os.path.join(self.prefix, 'bin', 'hk-host')
        rc, out = run_rc([hk_host, 'validate', 'hk-cuda', '--simulate=3', '--only',
                          'cuda.current-unchanged'], env=clean_env())
        self.assertEqual(rc, 0, out)
        self.assertIn('\ndevices: 3\n', out)
        self.assertIn('\n3 passed, 0 failed, 0 skipped', out)
        rc, out = run_rc([hk_host, 'validate', 'hk-cuda', '--simulate=17'], env=clean_env())
        self.assertEqual(rc, 2, out)
        self.assertIn('--simulate=17: not a decimal number from 1 to 16', out)

    def example(self, name, broken=False):
        """examples/hk-example built with its Makefile in work/name from the
        install alone (a copy of its sources when broken: every slot returns
        without giving the caller's context back)."""
        self.need('pkg-config', 'make')
        self.simulated()
        if not ARGS.nvcc:
            self.skipTest('no nvcc to compile the example\'s kernels')
        src = os.path.join(ARGS.root, 'examples', 'hk-example')
        out = os.path.join(self.work, name)
        shutil.rmtree(out, ignore_errors=True)
        os.makedirs(out)
        if broken:
            copy = os.path.join(self.work, name + '-src')
            shutil.rmtree(copy, ignore_errors=True)
            shutil.copytree(src, copy)
            ops = os.path.join(copy, 'example_ops.c')
            text = open(ops).read()
            self.assertIn('return hk_kit_end(&c, st);', text)
            open(ops, 'w').write(text.replace('return hk_kit_end(&c, st);', 'return st;'))
            src = copy
        env = dict(self.pcenv)
        del env['HK_CUDA_DRIVER']  # no driver chosen: the Makefile decides
        make = ['make', '-s', '-f', os.path.join(src, 'Makefile'), 'CC=' + ARGS.cc,
                'CUDA_HOME=' + ARGS.cuda_home, 'NVCC=' + ARGS.nvcc, 'CUDA_ARCH=' + ARGS.cuda_arch]
        run(make, env=env, cwd=out)
        return make, env, out

    def test_example_check_and_demo_without_a_driver(self):
        make, env, out = self.example('hk-example')
        self.assertFalse(os.path.exists(self.build))
        rc, text = run_rc(make + ['check'], env=env, cwd=out)
        self.assertEqual(rc, 0, text[-3000:])
        if not has_cuda_driver():
            self.assertIn("make check: no CUDA driver here: checking over handlekit's simulated "
                          "driver", text)
            self.assertIn('hk-validate: simulated CUDA driver %s/lib/handlekit/simcuda/'
                          'libcuda.so.1, 2 devices' % self.prefix, text)
        verdict = re.search(r'^make check: (\d+) checks passed, (\d+) skipped \((\d+) of them',
                            text, re.M)
        self.assertTrue(verdict, text[-3000:])
        passed, skipped, notsup = (int(g) for g in verdict.groups())
        # The CUDA code was checked: what was skipped beyond the slots the
        # example does not offer is a handful (before: 466 of 488).
        self.assertGreater(passed, 80, text[-3000:])
        self.assertLessEqual(skipped - notsup, 10, text[-3000:])
        rc, text = run_rc(make + ['demo'], env=env, cwd=out)
        self.assertEqual(rc, 0, text)
        self.assertEqual(text.splitlines()[-1], 'ok', text)
        self.assertIn('[%s/lib]' % self.prefix,
                      run(['readelf', '-d', os.path.join(out, 'hk-example-demo')]))

    def test_validate_simulate_fails_a_broken_plugin(self):
        make, env, out = self.example('hk-example-broken', broken=True)
        tool = os.path.join(self.prefix, 'bin', 'hk-validate')
        rc, text = run_rc([tool, '--simulate', os.path.join(out, 'hk-example.so')], env=env)
        self.assertEqual(rc, 1, text[-3000:])
        self.assertRegex(text, r'\ncuda\.current-unchanged\.memory +FAIL +after ')
        self.assertRegex(text, r'\nselfcheck\.cuda-current +FAIL ')
        rc, text = run_rc(make + ['check'], env=env, cwd=out)
        self.assertEqual(rc, 2, text[-3000:])
        self.assertRegex(text, r'make check: FAILED: hk-validate found [1-9][0-9]* '
                               r'failure\(s\) \(exit status 1\)')


def main():
    global ARGS
    ap = argparse.ArgumentParser()
    for opt in ('stage', 'prefix', 'libdir', 'libexecdir', 'bindir', 'includedir', 'version',
                'cc', 'root', 'work'):
        ap.add_argument('--' + opt, required=True)
    ap.add_argument('--cuda-home', default='/usr/local/cuda')
    ap.add_argument('--nvcc', default='')
    ap.add_argument('--cuda-arch', default='90')
    ARGS = ap.parse_args()
    ARGS.stage = os.path.abspath(ARGS.stage)
    return hk_unittest.run_module(sys.modules[__name__])


if __name__ == '__main__':
    sys.exit(main())
