#!/usr/bin/env python3
"""The installed tree as a user gets it.

The build stages `scons install` under <build>/stage (same rules as the real
install, no DESTDIR needed) and runs this script with the stage and the
configured directories. It checks the files and links installed, that the
shared loader exports only public hk_ names, then builds tests/install/host.c
outside the tree with nothing but the staged pkg-config file (and again with
the CMake package when cmake is present), runs the hosts on the staged hk-cpu
and checks what they print. Ends with "N passed, N failed, N skipped".
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ARGS = None
EXPECTED_RUN = ['saxpy: 3 5 7 9', 'ddot: 32']


def staged(path):
    """The staged location of an installed absolute path."""
    return os.path.join(ARGS.stage, path.lstrip('/'))


def run(argv, env=None, cwd=None):
    """Runs argv; returns its output; fails the test with the output otherwise."""
    proc = subprocess.run(argv, env=env, cwd=cwd, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True)
    if proc.returncode != 0:
        raise AssertionError('%s exited %d:\n%s' % (' '.join(argv), proc.returncode, proc.stdout))
    return proc.stdout


def clean_env(**extra):
    """The environment without anything that could point at another tree."""
    env = {k: v for k, v in os.environ.items()
           if k not in ('HK_PLUGIN_PATH', 'LD_LIBRARY_PATH', 'PKG_CONFIG_PATH',
                        'PKG_CONFIG_LIBDIR', 'PKG_CONFIG_SYSROOT_DIR', 'CMAKE_PREFIX_PATH')}
    env['HK_CUDA_DRIVER'] = '/nonexistent/libcuda.so.1'  # hk-cuda must not touch a GPU
    env.update(extra)
    return env


def dynamic_symbols(lib):
    """Names of the defined dynamic symbols of a shared object (nm -D)."""
    out = run(['nm', '-D', '--defined-only', lib])
    return [line.split()[-1] for line in out.splitlines() if line.strip()]


class Layout(unittest.TestCase):
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

    def test_plugins_and_programs(self):
        plugdir = staged(os.path.join(ARGS.libdir, 'handlekit', 'plugins'))
        self.assertIn('hk-cpu.so', os.listdir(plugdir))
        link = staged(os.path.join(ARGS.bindir, 'hk-host'))
        self.assertTrue(os.path.islink(link))
        self.assertEqual(os.path.realpath(link),
                         os.path.realpath(staged(os.path.join(ARGS.libdir, 'handlekit', 'bin',
                                                              'hk-host'))))

    def test_only_public_symbols_exported(self):
        lib = staged(os.path.join(ARGS.libdir, 'libhkloader.so.' + ARGS.version))
        names = dynamic_symbols(lib)
        self.assertIn('hk_loader_create', names)
        self.assertIn('hk_plugin_vtable', names)
        bad = [n for n in names if not re.match(r'^hk_[a-z0-9]', n)]
        self.assertEqual(bad, [], 'exported names other than public hk_*: %s' % bad)


class PkgConfig(unittest.TestCase):
    def setUp(self):
        if not shutil.which('pkg-config'):
            self.skipTest('pkg-config is not installed (tools/setup.sh installs it)')
        self.tmp = tempfile.mkdtemp(prefix='hk-install-')
        self.env = clean_env(PKG_CONFIG_PATH=staged(os.path.join(ARGS.libdir, 'pkgconfig')))

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def pkg(self, *args):
        return run(['pkg-config'] + list(args) + ['handlekit'], env=self.env).split()

    def test_variables_point_into_the_stage(self):
        self.assertEqual(run(['pkg-config', '--modversion', 'handlekit'], env=self.env).strip(),
                         ARGS.version)
        plugdir = run(['pkg-config', '--variable=plugindir', 'handlekit'], env=self.env).strip()
        self.assertEqual(os.path.realpath(plugdir),
                         os.path.realpath(staged(os.path.join(ARGS.libdir, 'handlekit',
                                                              'plugins'))))

    def test_shared_host_finds_the_installed_plugins(self):
        exe = os.path.join(self.tmp, 'host')
        run([ARGS.cc, '-std=c11', '-Wall', '-Werror', '-o', exe, os.path.join(HERE, 'host.c')]
            + ARGS.sanflags + self.pkg('--cflags', '--libs'), env=self.env, cwd=self.tmp)
        env = clean_env(LD_LIBRARY_PATH=staged(ARGS.libdir))
        out = run([exe], env=env, cwd=self.tmp).splitlines()
        plugdir = os.path.realpath(staged(os.path.join(ARGS.libdir, 'handlekit', 'plugins')))
        self.assertIn('plugin: hk-cpu %s/hk-cpu.so' % plugdir, out)
        self.assertEqual([l for l in out if l.startswith('refused')], [])
        self.assertEqual(out[-2:], EXPECTED_RUN)
        ldd = run(['ldd', exe], env=env)
        self.assertIn(os.path.realpath(staged(ARGS.libdir)), ldd)

    def test_static_host(self):
        exe = os.path.join(self.tmp, 'host-static')
        libs = ['-l:libhkloader.a' if f == '-lhkloader' else f
                for f in self.pkg('--static', '--libs')]
        run([ARGS.cc, '-std=c11', '-Wall', '-Werror', '-o', exe, os.path.join(HERE, 'host.c')]
            + ARGS.sanflags + self.pkg('--cflags') + libs, env=self.env, cwd=self.tmp)
        self.assertNotIn('libhkloader', run(['readelf', '-d', exe]))
        plugdir = run(['pkg-config', '--variable=plugindir', 'handlekit'], env=self.env).strip()
        out = run([exe, plugdir], env=clean_env(), cwd=self.tmp).splitlines()
        self.assertEqual(out[-2:], EXPECTED_RUN)


class CMakePackage(unittest.TestCase):
    def test_find_package(self):
        if not shutil.which('cmake'):
            self.skipTest('cmake is not installed')
        tmp = tempfile.mkdtemp(prefix='hk-cmake-')
        try:
            env = clean_env(CC=ARGS.cc)
            flags = ' '.join(ARGS.sanflags)
            run(['cmake', '-S', HERE, '-B', tmp, '-DCMAKE_PREFIX_PATH=' + staged(ARGS.prefix),
                 '-DCMAKE_BUILD_TYPE=Release', '-DCMAKE_C_FLAGS=' + flags,
                 '-DCMAKE_EXE_LINKER_FLAGS=' + flags], env=env)
            run(['cmake', '--build', tmp], env=env)
            for exe in ('host_shared', 'host_static'):
                # No LD_LIBRARY_PATH: CMake gives the build an rpath to the imported library.
                out = run([os.path.join(tmp, exe)], env=clean_env()).splitlines()
                self.assertEqual(out[-2:], EXPECTED_RUN, exe)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


class InstalledHost(unittest.TestCase):
    def test_hk_host_list_and_run(self):
        hk_host = staged(os.path.join(ARGS.bindir, 'hk-host'))
        plugdir = os.path.realpath(staged(os.path.join(ARGS.libdir, 'handlekit', 'plugins')))
        out = run([hk_host, 'list'], env=clean_env())
        self.assertIn(plugdir + '/hk-cpu.so', out)
        out = run([hk_host, 'run', '-n', '1000'], env=clean_env())
        self.assertTrue(out.startswith('plugin: hk-cpu'), out)


def main():
    global ARGS
    ap = argparse.ArgumentParser()
    for opt in ('stage', 'prefix', 'libdir', 'bindir', 'includedir', 'version', 'cc', 'root'):
        ap.add_argument('--' + opt, required=True)
    ap.add_argument('--sanflags', default='', help='flags of a sanitizer build, for the hosts')
    ARGS = ap.parse_args()
    ARGS.sanflags = ARGS.sanflags.split()
    ARGS.stage = os.path.abspath(ARGS.stage)
    suite = unittest.defaultTestLoader.loadTestsFromModule(sys.modules[__name__])
    result = unittest.TextTestRunner(stream=sys.stdout, verbosity=2).run(suite)
    failed = len(result.failures) + len(result.errors)
    skipped = len(result.skipped)
    passed = result.testsRun - failed - skipped
    print('%d passed, %d failed, %d skipped' % (passed, failed, skipped))
    return 0 if failed == 0 else 1


if __name__ == '__main__':
    sys.exit(main())
