#!/usr/bin/env python3
"""What the libraries export against what the public headers declare.

libhkloader.so must export exactly the functions that the loader's public
headers declare (every plugin_api/hk_*.h but the kit's hk_kit.h), and its
export map (loader/hkloader.map) must name exactly those: a function added to
a header and not to the map, or exported without a declaration, fails here.
The kit (libhkkit.a) is held to hk_kit.h the same way for its public hk_
names. Declarations are read by the compiler itself (GCC's -aux-info), so
static inline helpers and macros do not count. Ends with "N passed, N failed,
N skipped".
"""
import argparse
import ctypes
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'common'))
import hk_unittest  # noqa: E402

ARGS = None
# Public headers of a library other than the loader; every other hk_*.h is the loader's.
KIT_HEADERS = ('hk_kit.h',)
# Headers whose static inline functions libhkloader.so exports as well, for
# callers that cannot call an inline function (a foreign function interface):
# C code that includes the header calls its own copy.
INLINE_EXPORTED = ('hk_status_text.h',)


def run(argv):
    # A sanitizer runtime preloaded for this interpreter's ctypes test is not
    # the tools' business.
    env = {k: v for k, v in os.environ.items() if k != 'LD_PRELOAD'}
    proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          env=env)
    if proc.returncode != 0:
        raise AssertionError('%s exited %d:\n%s' % (' '.join(argv), proc.returncode, proc.stdout))
    return proc.stdout


def public_headers(api_dir):
    return sorted(n for n in os.listdir(api_dir)
                  if n.startswith('hk_') and n.endswith('.h') and not n.startswith('hk__'))


def declared(api_dir, headers, inline_from=()):
    """Names of the functions the headers declare extern (not static inline),
    and the static inline functions defined by the headers of inline_from."""
    tmp = tempfile.mkdtemp(prefix='hk-exports-')
    try:
        src = os.path.join(tmp, 'all.c')
        aux = os.path.join(tmp, 'aux.txt')
        with open(src, 'w') as f:
            f.writelines('#include "%s"\n' % h for h in headers)
        run([ARGS.cc, '-std=c11', '-I', api_dir, '-aux-info', aux, '-fsyntax-only', src])
        names = set()
        wanted = {os.path.join(os.path.realpath(api_dir), h) for h in headers}
        inline = {os.path.join(os.path.realpath(api_dir), h) for h in inline_from}
        # One line per declaration: "/* FILE:LINE:NC */ extern TYPE NAME (ARGS);",
        # "static" for a static (inline) function.
        for line in open(aux):
            m = re.match(r'/\* (.*):\d+:\w+ \*/ (extern|static) .*?\b(\w+) \(', line)
            if not m:
                continue
            where = os.path.realpath(m.group(1))
            if (where in wanted and m.group(2) == 'extern') or \
                    (where in inline and m.group(2) == 'static'):
                names.add(m.group(3))
        return names
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def exported(shlib):
    """Defined dynamic symbols of a shared object."""
    out = run(['nm', '-D', '--defined-only', shlib])
    return {line.split()[-1] for line in out.splitlines() if line.strip()}


def public_globals(archive):
    """Global symbols an archive defines with the public prefix hk_ (not hk__)."""
    out = run(['nm', '-g', '--defined-only', archive])
    names = set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and re.match(r'hk_[a-z0-9]', parts[2]):
            names.add(parts[2])
    return names


def map_names(path):
    """The names of a version script's global section."""
    text = re.sub(r'/\*.*?\*/', ' ', open(path).read(), flags=re.S)
    m = re.search(r'global:(.*?)local:', text, flags=re.S)
    return {n.strip() for n in m.group(1).split(';') if n.strip()} if m else set()


def difference(kind, have, want):
    """The two one-way differences as lines, empty when the sets agree."""
    lines = ['%s but not declared in a public header: %s' % (kind, n)
             for n in sorted(have - want)]
    lines += ['declared in a public header but not %s: %s' % (kind, n)
              for n in sorted(want - have)]
    return lines


class Exports(unittest.TestCase):
    def loader_headers(self):
        return [h for h in public_headers(ARGS.api) if h not in KIT_HEADERS]

    def loader_declared(self):
        return declared(ARGS.api, self.loader_headers(), INLINE_EXPORTED)

    def test_loader_exports_what_its_headers_declare(self):
        want = self.loader_declared()
        self.assertIn('hk_loader_create', want)
        self.assertIn('hk_mhandle_create', want)
        self.assertIn('hk_status_name', want)
        self.assertIn('hk_loader_version', want)
        self.assertEqual(difference('exported by libhkloader.so', exported(ARGS.shlib), want), [])

    def test_export_map_names_each_declared_function(self):
        want = self.loader_declared()
        names = map_names(ARGS.map)
        self.assertFalse(any('*' in n or '?' in n or '[' in n for n in names),
                         'the map names each symbol, without patterns: %s' % sorted(names))
        self.assertEqual(difference('named by %s' % os.path.basename(ARGS.map), names, want), [])

    def test_kit_public_names_are_its_header(self):
        if not ARGS.kit:
            self.skipTest('the kit (libhkkit.a) is not built: no cuda.h')
        want = declared(ARGS.api, list(KIT_HEADERS))
        self.assertIn('hk_kit_bind', want)
        self.assertEqual(difference('defined by libhkkit.a', public_globals(ARGS.kit), want), [])

    def test_status_texts_and_version_through_ffi(self):
        """What a caller without a C compiler sees: the status texts as the
        header's inline functions give them, and the library's version and
        ABI range."""
        lib = ctypes.CDLL(ARGS.shlib)
        for fn in (lib.hk_status_name, lib.hk_status_string):
            fn.restype, fn.argtypes = ctypes.c_char_p, [ctypes.c_int]
        self.assertEqual(lib.hk_status_name(0), b'OK')
        self.assertEqual(lib.hk_status_name(19), b'NOT_FOUND')
        self.assertEqual(lib.hk_status_string(19), b'the requested item was not found')
        self.assertEqual(lib.hk_status_name(-5), b'UNKNOWN')
        self.assertEqual(lib.hk_status_string(100000), b'unknown status')
        lib.hk_loader_version.restype = ctypes.c_char_p
        lib.hk_loader_version.argtypes = [ctypes.POINTER(ctypes.c_uint32)] * 2
        lo, hi = ctypes.c_uint32(), ctypes.c_uint32()
        self.assertEqual(lib.hk_loader_version(ctypes.byref(lo), ctypes.byref(hi)),
                         ARGS.version.encode())
        major, minor = (int(x) for x in ARGS.version.split('.')[:2])
        self.assertEqual((lo.value, hi.value), (major << 16, (major << 16) | minor))
        self.assertEqual(lib.hk_loader_version(None, None), ARGS.version.encode())

    def test_a_difference_is_reported_both_ways(self):
        # The reading and the comparison can fail: a header with one more
        # declaration, and an exported set with one more name.
        tmp = tempfile.mkdtemp(prefix='hk-exports-')
        try:
            shutil.copy(os.path.join(ARGS.api, 'hk_status.h'), tmp)
            with open(os.path.join(tmp, 'hk_extra.h'), 'w') as f:
                f.write('#include "hk_status.h"\nhk_status_t hk_extra_function(int x);\n'
                        'static inline int hk_extra_inline(void) { return 0; }\n')
            want = declared(tmp, ['hk_extra.h'])
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        self.assertEqual(want, {'hk_extra_function'})
        self.assertEqual(declared(ARGS.api, ['hk_status_text.h'], INLINE_EXPORTED),
                         {'hk_status_name', 'hk_status_string'})
        self.assertEqual(difference('exported', {'hk_other'}, want),
                         ['exported but not declared in a public header: hk_other',
                          'declared in a public header but not exported: hk_extra_function'])


def main():
    global ARGS
    ap = argparse.ArgumentParser()
    ap.add_argument('--cc', required=True)
    ap.add_argument('--api', required=True, help='the public headers (plugin_api)')
    ap.add_argument('--shlib', required=True, help='libhkloader.so')
    ap.add_argument('--map', required=True, help="the shared loader's export map")
    ap.add_argument('--kit', default='', help='libhkkit.a, when built')
    ap.add_argument('--version', required=True, help="the library's version, MAJOR.MINOR.PATCH")
    ARGS = ap.parse_args()
    return hk_unittest.run_module(sys.modules[__name__])


if __name__ == '__main__':
    sys.exit(main())
