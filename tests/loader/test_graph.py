#!/usr/bin/env python3
"""The loader's files call each other one way only, as loader/README.md says.

The calls between files are read from the compiled library (nm on
libhkloader.a: the names a member leaves undefined that another member
defines, functions and data alike), so a call through a macro or an inline
function of a header counts where it is compiled. Checked here: the graph
has no circle; it is the one loader/README.md draws under "Calls between
files" (each file's list, both ways); the private headers are included as
the README's "Private headers" says, and nothing outside loader/ includes
hk__loader.h or hk__swap.h. `--print` writes both blocks for the README.
Ends with "N passed, N failed, N skipped".
"""
import argparse
import os
import re
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'common'))
import hk_unittest  # noqa: E402

ARGS = None
PRIVATE = ('hk__loader.h', 'hk__swap.h')  # the loader's own headers
SKIP_DIRS = ('.git', 'build')


def calls(archive):
    """{file: {file it calls}} of an archive's members (names without .o)."""
    out = subprocess.run(['nm', archive], stdout=subprocess.PIPE, text=True, check=True).stdout
    defined, undefined, member = {}, {}, None
    for line in out.splitlines():
        if line.endswith('.o:'):
            member = line[:-3]
            undefined[member] = set()
            continue
        parts = line.split()
        if member is None or not parts:
            continue
        if len(parts) == 2 and parts[0] == 'U':
            undefined[member].add(parts[1])
        elif len(parts) == 3 and parts[1] in 'BCDGRSTVW':
            defined[parts[2]] = member
    return {m: {defined[s] for s in syms if s in defined and defined[s] != m}
            for m, syms in undefined.items()}


def cycle(graph):
    """One circle of graph as a list of nodes, or None."""
    state, stack = {}, []

    def visit(n):
        state[n] = 1
        stack.append(n)
        for m in sorted(graph.get(n, ())):
            if state.get(m) == 1:
                return stack[stack.index(m):] + [m]
            if m not in state:
                found = visit(m)
                if found:
                    return found
        stack.pop()
        state[n] = 2
        return None

    for n in sorted(graph):
        if n not in state:
            found = visit(n)
            if found:
                return found
    return None


def includes(root, loader_dir):
    """{private header: {file including it}}: loader files by name, others by path."""
    found = {h: set() for h in PRIVATE}
    for top, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d not in SKIP_DIRS and not d.startswith('.')]
        for name in files:
            if not name.endswith(('.c', '.h', '.cu', '.cuh', '.cpp')):
                continue
            path = os.path.join(top, name)
            text = open(path, errors='replace').read()
            for h in PRIVATE:
                if re.search(r'^\s*#\s*include\s*[<"]%s[>"]' % re.escape(h), text, re.M):
                    inside = os.path.realpath(top) == os.path.realpath(loader_dir)
                    found[h].add(name if inside else os.path.relpath(path, root))
    return found


def readme_block(text, heading):
    """{name: {names}} from the code block under heading: lines "a -> b c"."""
    m = re.search(r'^#+ %s\n.*?```\n(.*?)```' % re.escape(heading), text, re.S | re.M)
    if not m:
        return None
    block = {}
    for line in m.group(1).splitlines():
        if '->' in line:
            left, right = line.split('->', 1)
            block[left.strip()] = set(right.split()) - {'(nothing)'}
    return block


def render(graph, order):
    names = order + sorted(set(graph) - set(order))
    width = max(len(n) for n in names)
    return '\n'.join('%-*s -> %s' % (width, n, ' '.join(sorted(graph.get(n, ()))) or '(nothing)')
                     for n in names)


class Graph(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.graph = calls(ARGS.archive)
        cls.readme = open(ARGS.readme).read()

    def test_library_members_read(self):
        self.assertIn('hk_loader', self.graph)
        self.assertIn('hk_loader_report', self.graph['hk_loader'])

    def test_no_circle(self):
        self.assertIsNone(cycle(self.graph))

    def test_cycle_finder_finds_one(self):
        self.assertEqual(cycle({'a': {'b'}, 'b': {'c'}, 'c': {'a'}}), ['a', 'b', 'c', 'a'])
        self.assertIsNone(cycle({'a': {'b'}, 'b': {'c'}, 'c': set()}))

    def test_readme_draws_the_calls(self):
        drawn = readme_block(self.readme, 'Calls between files')
        self.assertIsNotNone(drawn, 'no "Calls between files" block in the README')
        want = {k: v for k, v in self.graph.items()}
        self.assertEqual(sorted(drawn), sorted(want), 'files drawn against files built')
        wrong = ['%s: README %s, built %s' % (k, sorted(drawn[k]), sorted(want[k]))
                 for k in sorted(want) if drawn[k] != want[k]]
        self.assertEqual(wrong, [])

    def test_private_headers_stay_in_the_loader(self):
        found = includes(ARGS.root, ARGS.loader_dir)
        outside = sorted(f for files in found.values() for f in files if '/' in f)
        self.assertEqual(outside, [])
        drawn = readme_block(self.readme, 'Private headers')
        self.assertIsNotNone(drawn, 'no "Private headers" block in the README')
        self.assertEqual({h: drawn.get(h) for h in PRIVATE}, found)


def main():
    global ARGS
    ap = argparse.ArgumentParser()
    ap.add_argument('--archive', required=True, help='libhkloader.a')
    ap.add_argument('--readme', required=True, help='loader/README.md')
    ap.add_argument('--root', required=True, help='the repository')
    ap.add_argument('--loader-dir', required=True, help='loader/')
    ap.add_argument('--print', action='store_true', help="print the README's blocks")
    ARGS = ap.parse_args()
    if ARGS.print:
        order = re.findall(r'^(\S+)\s+->', readme_block_text(ARGS.readme), re.M)
        print(render(calls(ARGS.archive), order))
        print()
        found = includes(ARGS.root, ARGS.loader_dir)
        print(render(found, list(PRIVATE)))
        return 0
    return hk_unittest.run_module(sys.modules[__name__])


def readme_block_text(path):
    """The README's calls block as text ("" when none), for its order."""
    m = re.search(r'^#+ Calls between files\n.*?```\n(.*?)```', open(path).read(), re.S | re.M)
    return m.group(1) if m else ''


if __name__ == '__main__':
    sys.exit(main())
