#!/usr/bin/env python3
"""The one-way house: rules every part of the product keeps (docs/house.md).

1. No circle of calls between the files of one C component. A component is
   one thing the build links from several objects (libhkloader.a, hk-probe,
   libhkloader.so, libhkkit.a, hk-cuda, hk-cpu, hk-host, hk-validate,
   hk-bench, ...); the objects are the nodes the build made, passed by
   tests/house/SConscript, so a sanitizer build checks its own. A file calls
   another when its object leaves a name undefined that the other defines
   (nm: functions and data alike), as tests/loader/test_graph.py reads the
   loader. A circle is named with its files and, for each call between them,
   one name used, so that one sees what to move down.
2. No circle of imports between the modules of python/handlekit, read with
   the ast module: `from . import x`, `from .x import y`, `import
   handlekit.x`, `from handlekit.x import y`, at any depth: an import inside
   a function counts, since the module still depends on the other one. The
   package's __init__ that Python runs before any of its modules is not an
   edge of its own; `from . import name` of a name that is no module is an
   import of __init__.
3. Sizes: no function over 80 lines and no file over 800 lines in product
   sources: C and headers under loader/, plugin/, plugin_api/, common/,
   validate/, host_example/, bench/, the kernels of kernels/ (.cu, .cuh),
   the Python package python/handlekit and the Java binding java/src. Tests,
   examples and tools are not product and are not measured. A C function is
   counted from the first line of its head to its closing brace (the opening
   and closing braces alone at column 0, after the line closing its
   parameters) (the project's style; a function
   head that ends with "{" is reported, as its length would not be seen); a
   Python function from its first body line to its last (ast end_lineno); a
   Java method from the line of its opening brace to the line of its closing
   one.
4. What only the programs use stays theirs: no file of the libraries and
   plugins (loader/, plugin/, plugin_api/, common/lib/) includes a header of
   common/prog/ (the argument parser, JSON writer, histograms of hk-host,
   hk-validate and hk-bench). The build enforces it too: those parts are
   compiled without common/prog on their include path.
5. The project's documents are its own: every document a file of the
   repository names (a name ending in .md) is a file of the repository, so no
   comment, doc or message sends a reader to a text they cannot have.
Each rule also runs once on a generated fixture that breaks it (two C files
calling each other, an 81-line function, two modules importing each other)
and must report it, so a rule that stopped seeing anything fails.
Ends with "N passed, N failed, N skipped".
"""
import argparse
import ast
import os
import re
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'common'))
import hk_unittest  # noqa: E402

ARGS = None
FUNC_MAX = 80
FILE_MAX = 800
EDGES = 5  # calls of a circle repeated in the closing summary
C_DIRS = ('loader', 'plugin', 'plugin_api', 'common', 'validate', 'host_example', 'bench',
          'kernels')
C_EXT = ('.c', '.h', '.cu', '.cuh')
SKIP_DIRS = ('.git', 'build', '__pycache__', 'tests')


# ---- calls between C files -------------------------------------------------

def object_calls(objects):
    """{file: {file: a name it uses there}} of a list of object files (names
    without .o/.os); an object defining nothing another uses still appears."""
    defined, undefined = {}, {}
    for path in objects:
        name = re.sub(r'\.(o|os)$', '', os.path.basename(path))
        out = subprocess.run(['nm', path], stdout=subprocess.PIPE, text=True,
                             check=True).stdout
        undefined.setdefault(name, set())
        for line in out.splitlines():
            parts = line.split()
            if len(parts) == 2 and parts[0] == 'U':
                undefined[name].add(parts[1])
            elif len(parts) == 3 and parts[1] in 'BCDGRSTVW':
                defined.setdefault(parts[2], name)
    graph = {}
    for name, syms in undefined.items():
        graph[name] = {}
        for s in sorted(syms):
            owner = defined.get(s)
            if owner is not None and owner != name:
                graph[name].setdefault(owner, s)
    return graph


def knots(graph):
    """The strongly connected parts of more than one node (sorted lists):
    every circle lies inside one of them."""
    index, low, stack, on, found = {}, {}, [], set(), []
    counter = [0]

    def visit(n):
        index[n] = low[n] = counter[0]
        counter[0] += 1
        stack.append(n)
        on.add(n)
        for m in sorted(graph.get(n, ())):
            if m not in index:
                visit(m)
                low[n] = min(low[n], low[m])
            elif m in on:
                low[n] = min(low[n], index[m])
        if low[n] == index[n]:
            part = []
            while True:
                w = stack.pop()
                on.discard(w)
                part.append(w)
                if w == n:
                    break
            if len(part) > 1:
                found.append(sorted(part))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10000))
    for n in sorted(graph):
        if n not in index:
            visit(n)
    return sorted(found)


def describe_knots(graph, what='calls'):
    """One paragraph per circle: its files and each edge inside it with the
    name used (a dict of names) or the line of the import."""
    lines = []
    for part in knots(graph):
        lines.append('circle of %d files: %s' % (len(part), ' '.join(part)))
        for a in part:
            for b in sorted(graph[a]):
                if b in part:
                    lines.append('    %s -> %s (%s %s)' % (a, b, what, graph[a][b]))
    return lines


# ---- imports between Python modules ----------------------------------------

def python_imports(pkg_dir, pkg='handlekit'):
    """{module: {module: 'line N'}} of a flat package's modules."""
    mods = {f[:-3] for f in os.listdir(pkg_dir) if f.endswith('.py')}
    graph = {}
    for mod in sorted(mods):
        path = os.path.join(pkg_dir, mod + '.py')
        tree = ast.parse(open(path).read(), path)
        edges = graph.setdefault(mod, {})

        def add(target, node):
            if target in mods and target != mod:
                edges.setdefault(target, 'line %d' % node.lineno)

        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    parts = alias.name.split('.')
                    if parts[0] == pkg and len(parts) > 1:
                        add(parts[1], node)
            elif isinstance(node, ast.ImportFrom):
                if node.level == 1 or (node.level == 0 and node.module
                                       and node.module.split('.')[0] == pkg):
                    parts = (node.module or '').split('.')
                    if node.level == 0:
                        parts = parts[1:]
                    if parts and parts[0]:
                        add(parts[0], node)
                    else:
                        for alias in node.names:
                            add(alias.name if alias.name in mods else '__init__', node)
    return graph


# ---- sizes -----------------------------------------------------------------

C_HEAD_WITH_BRACE = re.compile(r'^[A-Za-z_][^=;#]*\)\s*\{\s*$')


def c_functions(lines):
    """[(line of "{", length)] of a C file in the house style, and the lines
    of function heads that end with "{" (their length is not counted)."""
    found, bad = [], []
    for i, line in enumerate(lines):
        if C_HEAD_WITH_BRACE.match(line) and not line.startswith(('struct', 'union', 'enum',
                                                                  'typedef', 'extern')):
            bad.append(i + 1)
        if line.rstrip() != '{' or i == 0 or not lines[i - 1].rstrip().endswith(')'):
            continue
        head = i - 1  # the head's first line: up past the lines of its parameters
        while head > 0 and lines[head - 1].strip() and \
                not lines[head - 1].rstrip().endswith((';', '}', '*/', '{')) and \
                not lines[head - 1].lstrip().startswith(('#', '/*', '*', '//')):
            head -= 1
        for j in range(i + 1, len(lines)):
            if lines[j].startswith('}'):
                found.append((i + 1, j - head + 1))
                break
    return found, bad


def python_functions(text, path):
    """[(line of the def, body length)]."""
    out = []
    for node in ast.walk(ast.parse(text, path)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            out.append((node.lineno, node.end_lineno - node.body[0].lineno + 1))
    return out


JAVA_NOT_METHOD = ('if', 'for', 'while', 'switch', 'catch', 'try', 'else', 'do', 'return',
                   'new', 'synchronized', 'throw', 'class', 'record', 'interface', 'enum')
JAVA_HEAD = re.compile(r'^\s*(?:(?:public|protected|private|static|final|synchronized|abstract|'
                       r'default|native)\s+)*(?:<[^>]*>\s+)?(?:[\w.<>\[\]?, ]+\s+)?(\w+)\s*\(')


def java_braces(line):
    """The line without strings, characters and // comments."""
    line = re.sub(r'"(?:\\.|[^"\\])*"', '""', line)
    line = re.sub(r"'(?:\\.|[^'\\])*'", "''", line)
    return line.split('//', 1)[0]


def java_methods(lines):
    """[(line of the head, length from its "{" to its "}")]."""
    out, i = [], 0
    while i < len(lines):
        m = JAVA_HEAD.match(lines[i])
        words = set(re.findall(r'\w+', lines[i].split('(', 1)[0]))
        if not m or words & set(JAVA_NOT_METHOD) or lines[i].strip().startswith(('*', '/')):
            i += 1
            continue
        j = i  # the parameters may run over several lines: find the "{" or ";"
        while j < len(lines) and '{' not in java_braces(lines[j]) and ';' not in lines[j]:
            j += 1
        if j == len(lines) or '{' not in java_braces(lines[j]):
            i += 1
            continue
        depth, k = 0, j
        while k < len(lines):
            text = java_braces(lines[k])
            depth += text.count('{') - text.count('}')
            if depth <= 0:
                break
            k += 1
        out.append((i + 1, k - j + 1))
        i += 1
    return out


def product_files(root):
    """Product source files (paths relative to root) and their kind."""
    out = []
    for top in C_DIRS:
        for d, dirs, files in os.walk(os.path.join(root, top)):
            dirs[:] = sorted(x for x in dirs if x not in SKIP_DIRS and not x.startswith('.'))
            out += [(os.path.relpath(os.path.join(d, f), root), 'c')
                    for f in sorted(files) if f.endswith(C_EXT)]
    for top, ext, kind in (('python/handlekit', '.py', 'py'), ('java/src', '.java', 'java')):
        for d, dirs, files in os.walk(os.path.join(root, top)):
            dirs[:] = sorted(x for x in dirs if x not in SKIP_DIRS and not x.startswith('.'))
            out += [(os.path.relpath(os.path.join(d, f), root), kind)
                    for f in sorted(files) if f.endswith(ext)]
    return out


def size_offenders(root, files):
    """Lines "path:line: ..." for each function or file over its limit."""
    bad = []
    for rel, kind in files:
        text = open(os.path.join(root, rel), errors='replace').read()
        lines = text.splitlines()
        if len(lines) > FILE_MAX:
            bad.append('%s:1: file of %d lines (at most %d)' % (rel, len(lines), FILE_MAX))
        if kind == 'c':
            funcs, heads = c_functions(lines)
            bad += ['%s:%d: function head ends with "{" (the "{" goes alone on the next '
                    'line, at column 0)' % (rel, n) for n in heads]
        elif kind == 'py':
            funcs = python_functions(text, rel)
        else:
            funcs = java_methods(lines)
        bad += ['%s:%d: function of %d lines (at most %d)' % (rel, n, length, FUNC_MAX)
                for n, length in funcs if length > FUNC_MAX]
    return bad


# ---- what the libraries may include ---------------------------------------

LIB_DIRS = ('loader', 'plugin', 'plugin_api', 'common/lib')
PROG_DIR = 'common/prog'


def prog_include_offenders(root):
    """Lines "path:line: includes common/prog/NAME" for each file of the
    libraries and plugins that includes a header only the programs have."""
    prog = {f for f in os.listdir(os.path.join(root, PROG_DIR)) if f.endswith('.h')}
    bad = []
    for rel, kind in product_files(root):
        if kind != 'c' or not rel.startswith(tuple(d + '/' for d in LIB_DIRS)):
            continue
        for n, line in enumerate(open(os.path.join(root, rel), errors='replace'), 1):
            m = re.match(r'\s*#\s*include\s*["<]([^">]+)[">]', line)
            if m and os.path.basename(m.group(1)) in prog:
                bad.append('%s:%d: includes %s/%s, which only the programs compile in'
                           % (rel, n, PROG_DIR, os.path.basename(m.group(1))))
    return bad


# ---- documents named ------------------------------------------------------

DOC_SKIP = ('.git', 'build', '__pycache__', '.devcarry', 'node_modules')
DOC_EXT = ('.c', '.h', '.cu', '.cuh', '.py', '.java', '.md', '.sh', '.txt', '.in', '.json',
           '.toml', '.cfg', '.map', '.S', 'SConscript', 'SConstruct', 'Makefile', 'run')


def missing_documents(root):
    """Lines "path:line: names <doc>, which is not in the repository"."""
    files = []
    for d, dirs, names in os.walk(root):
        dirs[:] = sorted(x for x in dirs if x not in DOC_SKIP)
        files += [os.path.join(d, n) for n in sorted(names)]
    have = {os.path.basename(f) for f in files if f.endswith('.md')}
    bad = []
    for f in files:
        if not f.endswith(DOC_EXT):
            continue
        for n, line in enumerate(open(f, errors='replace'), 1):
            for doc in re.findall(r'([A-Za-z0-9_-]+\.md)\b', line):
                if doc not in have:
                    bad.append('%s:%d: names %s, which is not in the repository'
                               % (os.path.relpath(f, root), n, doc))
    return bad


# ---- the checks ------------------------------------------------------------

class House(unittest.TestCase):
    def test_python_no_import_circle(self):
        graph = python_imports(os.path.join(ARGS.root, 'python', 'handlekit'))
        self.assertIn('_core', graph)
        found = describe_knots(graph, 'import at')
        if found:
            self.fail('python/handlekit: imports between its modules go round:\n'
                      + '\n'.join(found))

    def test_sizes(self):
        files = product_files(ARGS.root)
        self.assertTrue(any(f.startswith('loader/') for f, _ in files))
        self.assertTrue(any(k == 'py' for _, k in files))
        self.assertTrue(any(k == 'java' for _, k in files))
        found = size_offenders(ARGS.root, files)
        if found:
            self.fail('%d over the limits:\n%s' % (len(found), '\n'.join(found)))


    def test_libraries_include_no_program_header(self):
        self.assertTrue(os.listdir(os.path.join(ARGS.root, PROG_DIR)))
        found = prog_include_offenders(ARGS.root)
        if found:
            self.fail('%d includes of program-only headers:\n%s'
                      % (len(found), '\n'.join(found)))


    def test_documents_named_are_here(self):
        found = missing_documents(ARGS.root)
        if found:
            self.fail('%d names of documents the repository lacks:\n%s'
                      % (len(found), '\n'.join(found)))


def unit_test(name, objects):
    def test(self):
        for path in objects:
            self.assertTrue(os.path.exists(path), path)
        graph = object_calls(objects)
        found = describe_knots(graph)
        if found:
            self.fail('%s: calls between its files go round:\n%s' % (name, '\n'.join(found)))
    return test


class Fixtures(unittest.TestCase):
    """Each rule reports a fault planted in a generated fixture."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix='hk-house-')
        self.dir = self.tmp.name

    def tearDown(self):
        self.tmp.cleanup()

    def write(self, name, text):
        path = os.path.join(self.dir, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, 'w') as f:
            f.write(text)
        return path

    def compile(self, name, text):
        src = self.write(name, text)
        obj = src[:-2] + '.o'
        subprocess.run([ARGS.cc, '-c', '-o', obj, src], check=True)
        return obj

    def test_c_circle_reported(self):
        a = self.compile('fa.c', 'int fb_value(void);\nint fa_value(void) { return 1; }\n'
                         'int fa_use(void) { return fb_value(); }\n')
        b = self.compile('fb.c', 'int fa_value(void);\nint fb_data = 3;\n'
                         'int fb_value(void) { return fa_value() + fb_data; }\n')
        c = self.compile('fc.c', 'extern int fb_data;\nint fc(void) { return fb_data; }\n')
        lines = describe_knots(object_calls([a, b, c]))
        self.assertEqual(lines, ['circle of 2 files: fa fb',
                                 '    fa -> fb (calls fb_value)',
                                 '    fb -> fa (calls fa_value)'])
        self.assertEqual(describe_knots(object_calls([b, c])), [])
        self.assertEqual(object_calls([b, c])['fc'], {'fb': 'fb_data'})

    def test_python_circle_reported(self):
        pkg = os.path.join(self.dir, 'handlekit')
        self.write('handlekit/__init__.py', 'from ._a import f\n')
        self.write('handlekit/_a.py', 'def f():\n    from . import _b\n    return _b\n')
        self.write('handlekit/_b.py', 'import handlekit._a\n')
        self.write('handlekit/_c.py', 'from ._a import f\nfrom . import f as g\n')
        graph = python_imports(pkg)
        self.assertEqual(graph['_c'], {'_a': 'line 1', '__init__': 'line 2'})
        self.assertEqual(describe_knots(graph, 'import at'),
                         ['circle of 2 files: _a _b', '    _a -> _b (import at line 2)',
                          '    _b -> _a (import at line 1)'])

    def test_sizes_reported(self):
        body = ''.join('    x += %d;\n' % i for i in range(FUNC_MAX - 3))
        self.write('loader/ok.c', 'int ok(int x)\n{\n' + body + '}\n')
        self.write('loader/long.c', 'int f(void)\n{\n    int x = 0;\n' + body + '}\n')
        self.write('loader/brace.c', 'int g(void) {\n    return 0;\n}\n')
        self.write('common/big.h', '/* a */\n' * (FILE_MAX + 1))
        pybody = ''.join('    x += %d\n' % i for i in range(FUNC_MAX + 1))
        self.write('python/handlekit/m.py', 'def f(x):\n' + pybody + 'def g(x):\n' +
                   pybody[:-len('    x += %d\n' % FUNC_MAX)])
        jbody = ''.join('        x += %d;\n' % i for i in range(FUNC_MAX - 2))
        self.write('java/src/A.java', 'class A {\n    int f(int x,\n          int y) {\n' +
                   jbody + '        return x;\n    }\n\n    int g() {\n'
                   '        if (true) {\n            return "}".length();\n        }\n'
                   '        return 0;\n    }\n}\n')
        files = product_files(self.dir)
        self.assertEqual(size_offenders(self.dir, files), [
            'loader/brace.c:1: function head ends with "{" (the "{" goes alone on the next '
            'line, at column 0)',
            'loader/long.c:2: function of 81 lines (at most 80)',
            'common/big.h:1: file of %d lines (at most %d)' % (FILE_MAX + 1, FILE_MAX),
            'python/handlekit/m.py:1: function of 81 lines (at most 80)',
            'java/src/A.java:2: function of 81 lines (at most 80)'])
        self.assertEqual(java_methods(open(os.path.join(self.dir, 'java/src/A.java'))
                                      .read().splitlines())[1], (85, 6))


    def test_program_header_in_library_reported(self):
        self.write('common/prog/hk__cli.h', '/* the parser of the programs */\n')
        self.write('common/lib/hk__trace.c', '#include "hk__trace.h"\n')
        self.write('loader/a.c', '#include <stdio.h>\n\n#  include "hk__cli.h"\n')
        self.write('validate/main.c', '#include "hk__cli.h"\n')
        self.assertEqual(prog_include_offenders(self.dir), [
            'loader/a.c:3: includes common/prog/hk__cli.h, which only the programs compile in'])


    def test_missing_document_reported(self):
        self.write('docs/abi.md', '# ABI\n')
        elsewhere = 'DESIGN' + '.md'  # spelled apart: this file must not name it
        self.write('loader/a.c', '/* see docs/abi.md */\n/* see ../shared/%s */\n' % elsewhere)
        self.assertEqual(missing_documents(self.dir), [
            'loader/a.c:2: names %s, which is not in the repository' % elsewhere])


def main():
    global ARGS
    ap = argparse.ArgumentParser()
    ap.add_argument('--root', required=True, help='the repository')
    ap.add_argument('--cc', required=True, help='the C compiler, for the fixtures')
    ap.add_argument('--unit', action='append', default=[],
                    help='NAME=OBJ,OBJ,...: one component and the objects it is linked from')
    ARGS = ap.parse_args()
    for spec in ARGS.unit:
        name, _, objs = spec.partition('=')
        setattr(House, 'test_c_no_circle_' + re.sub(r'\W', '_', name),
                unit_test(name, [o for o in objs.split(',') if o]))
    result = hk_unittest.run(unittest.defaultTestLoader.loadTestsFromModule(sys.modules[__name__]))
    # What breaks the house, again as "FAIL:" lines: the lines that the test
    # runner repeats at the end of `scons test` and tools/check.sh (at most
    # EDGES calls of a circle there; all of them are above).
    for _, text in result.failures:
        msg = text.split('AssertionError: ', 1)[-1].rstrip('\n').splitlines()
        edges = 0
        for line in msg:
            edges = edges + 1 if line.startswith('    ') else 0
            if edges == EDGES + 1:
                print('FAIL: house:     ... (the whole circle is listed above)')
            if edges <= EDGES:
                print('FAIL: house: %s' % line)
    return hk_unittest.summary(result)


if __name__ == '__main__':
    sys.exit(main())
