"""The documents against the build, so that they cannot drift from it.

1. Every command line the documents quote for hk-host or hk-validate (in a
   code span or a code block) names a real command, and every option on it
   is in that command's real --help.
2. Every sample block, a code block whose first line is "$ COMMAND" (then
   the output, and possibly more "$ COMMAND" lines), is run against the
   build when COMMAND runs hk-host or hk-validate, and its output must have
   the sample's shape: line for line the same text, where a path in the
   sample stands for any path, "..." within a line for any text, and a line
   "..." alone for any number of lines. Every figure is compared as it is.
3. The Python package raises what python/README.md says for an alpha that
   is a string ('2'): TypeError, in both pointer modes.

Environment: HK_DOCS_ROOT (the source tree), HK_DOCS_BUILD (the build
directory, e.g. build/debug, absolute), HK_DOCS_SIM (the simulated driver,
optional: without it the samples that need it are skipped and said so),
HK_LOADER_LIBRARY (for 3). Prints one line per problem and a total; exits 1
on any problem."""
import glob
import os
import re
import shlex
import subprocess
import sys
import tempfile

ROOT = os.environ['HK_DOCS_ROOT']
BUILD = os.environ['HK_DOCS_BUILD']
SIM = os.environ.get('HK_DOCS_SIM', '')
DOCS = (['README.md'] + sorted(os.path.relpath(p, ROOT) for p in glob.glob(ROOT + '/docs/*.md'))
        + ['validate/README.md', 'python/README.md', 'examples/hk-example/README.md'])
PROGRAMS = ('hk-host', 'hk-validate')

problems = []
counts = {'commands': 0, 'options': 0, 'samples': 0, 'skipped': 0}


def problem(where, text):
    problems.append('%s: %s' % (where, text))


def clean_env():
    env = dict(os.environ)
    for k in ('HK_PLUGIN_PATH', 'HK_PLUGIN_PIN', 'HK_PLUGIN_EXCLUDE', 'HK_TRACE',
              'HK_TRACE_FILE', 'HK_CUDA_DRIVER', 'LD_LIBRARY_PATH', 'SIMCUDA_DEVICES'):
        env.pop(k, None)
    return env


def run(argv, env=None, shell=False, cwd=None):
    env = env or clean_env()
    if shell:
        # A sanitizer build preloads its runtime for the Python checks; the
        # shell itself is not built with it (dash crashes under libtsan), and
        # the programs it runs link their runtime themselves.
        env = dict(env)
        env.pop('LD_PRELOAD', None)
    p = subprocess.run(argv, shell=shell, cwd=cwd, env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=120)
    return p.returncode, p.stdout.decode('utf-8', 'replace')


# ---- 1. commands and options ----

HELP = {}


def help_of(program, command):
    key = (program, command)
    if key not in HELP:
        argv = [os.path.join(BUILD, 'bin', program)] + ([command] if command else []) + ['--help']
        HELP[key] = run(argv)[1]
    return HELP[key]


def host_commands():
    text = help_of('hk-host', None)
    block = text.split('commands:\n', 1)[1].split('options:\n', 1)[0]
    return set(re.findall(r'^  ([a-z]+)\b', block, re.M))


def quoted_lines(text):
    """Each quoted command line of a document: code spans and the lines of
    code blocks, with its line number."""
    lines = text.splitlines()
    in_block = False
    for n, line in enumerate(lines, 1):
        if line.startswith('```'):
            in_block = not in_block
            continue
        if in_block:
            yield n, line.lstrip('$ ')
        else:
            for span in re.findall(r'`([^`]+)`', line):
                yield n, span


def words(text):
    """Shell words of text, tolerant of what is not shell (brackets, a
    lone quote): the words of a quoted command line."""
    text = text.split(' #', 1)[0].split('|', 1)[0]
    try:
        return shlex.split(text)
    except ValueError:
        return text.split()


def has_option(help_text, opt):
    name = opt.split('=', 1)[0]
    return re.search(r'(^|[\s,\[(|])' + re.escape(name) + r'(?![\w-])', help_text, re.M)


def check_command_line(where, program, args):
    """args: the words after the program's name."""
    counts['commands'] += 1
    args = [a.strip('[]') for a in args]
    args = [a for a in args if a and a not in ('...', '|')]
    command = None
    if program == 'hk-host':
        for a in args:
            if a == '--':
                break
            if not a.startswith('-'):
                command = a
                break
        if command is not None and (command.startswith('<') or command.isupper()
                                    or command not in host_commands()):
            if command.startswith('<') or command.isupper() or not re.match(r'^[a-z]+$',
                                                                            command):
                command = None  # a placeholder, or an option's value
            else:
                problem(where, 'hk-host has no command "%s"' % command)
                return
    help_text = help_of(program, command)
    if command == 'bench' and 'hk-bench' not in help_text:
        return  # hk-bench's own options: not built here, cannot be checked
    if program == 'hk-host' and command:
        help_text += help_of('hk-host', None)  # hk-host's own options before the command
    for a in args:
        if a == '--':
            break
        if re.match(r'^--?[A-Za-z]', a):
            counts['options'] += 1
            if not has_option(help_text, a):
                problem(where, '%s %s: %s is not in its --help' % (program, command or '', a))


def check_quoted(doc, text):
    for n, line in quoted_lines(text):
        for program in PROGRAMS:
            m = re.search(r'(?:^|[\s/=])' + program + r'(?:\s+(.*)|$)', line)
            if not m or re.search(program + r'[.\w/-]', line[m.start():m.start() + 40]
                                  .replace(program + ' ', '')):
                continue
            rest = words(m.group(1) or '')
            if program == 'hk-host' and rest and rest[0] == 'validate':
                # the rest is hk-validate's, after the plugin
                check_command_line('%s:%d' % (doc, n), 'hk-host', rest[:1])
                continue
            check_command_line('%s:%d' % (doc, n), program, rest)


# ---- 2. sample blocks ----

PATH = re.compile(r'(?<![\w.])(?:/|\.\./|build/)[^\s:()"\',]*')


def line_pattern(sample):
    """A regex for one sample line: paths any path, "..." any text."""
    out, pos = [], 0
    for m in re.finditer(r'\.\.\.|…|' + PATH.pattern, sample):
        out.append(re.escape(sample[pos:m.start()]))
        out.append('.*' if m.group(0) in ('...', '…') else r'[^\s:()"\',]*')
        pos = m.end()
    out.append(re.escape(sample[pos:]))
    return re.compile(''.join(out) + r'\Z')


def shape_matches(expected, actual):
    """Whether actual (lines) has the shape of expected (lines)."""
    def match(i, j):
        if i == len(expected):
            return j == len(actual)
        if expected[i].strip() == '...':
            return any(match(i + 1, k) for k in range(j, len(actual) + 1))
        return j < len(actual) and line_pattern(expected[i]).match(actual[j]) is not None \
            and match(i + 1, j + 1)
    return match(0, 0)


def samples(text):
    """(line number, command, expected lines) of every "$ " sample block."""
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        if lines[i].startswith('```') and i + 1 < len(lines) and lines[i + 1].startswith('$ '):
            j = i + 1
            cur = None
            while j < len(lines) and not lines[j].startswith('```'):
                if lines[j].startswith('$ '):
                    if cur:
                        yield cur
                    cur = (j + 1, lines[j][2:], [])
                else:
                    cur[2].append(lines[j])
                j += 1
            if cur:
                yield cur
            i = j
        i += 1


def check_sample(where, command, expected, tmp):
    if not re.search(r'bin/hk-(host|validate)\b', command):
        counts['skipped'] += 1
        return
    if 'simcuda' in command and not SIM:
        counts['skipped'] += 1
        print('skipped: %s: needs the simulated driver' % where)
        return
    cmd = re.sub(r'\bbuild/(release|debug)/tests/simcuda/libcuda\.so\.1', '\0SIM\0', command)
    cmd = re.sub(r'\bbuild/(release|debug)/', '\0BUILD\0/', cmd)
    cmd = cmd.replace('/tmp/', tmp + '/').replace('\0SIM\0', SIM).replace('\0BUILD\0', BUILD)
    counts['samples'] += 1
    rc, out = run(cmd, shell=True, cwd=tmp)
    actual = out.rstrip('\n').split('\n')
    if not shape_matches(expected, actual):
        problem(where, 'the sample of `%s` is not what it prints now:\n  sample:\n    %s\n'
                '  now:\n    %s' % (command, '\n    '.join(expected),
                                      '\n    '.join(actual[:12] + (['...'] if actual[12:] else []))))


# ---- 3. what python/README.md says an alpha of '2' raises ----

def check_python_alpha():
    text = open(os.path.join(ROOT, 'python/README.md')).read()
    m = re.search(r'`(\w+)`: an `alpha` that is a string such as `\'2\'`', text)
    if not m:
        problem('python/README.md', 'no longer says what an alpha of \'2\' raises')
        return
    script = r'''
import ctypes, sys
sys.path.insert(0, %r)
import handlekit as hk
class A:
    def __init__(s):
        s.buf = (ctypes.c_float * 4)(1, 1, 1, 1)
        s.__array_interface__ = {'shape': (4,), 'typestr': '<f4', 'version': 3,
                                 'data': (ctypes.addressof(s.buf), False), 'strides': None}
loader = hk.Loader(default_dir=%r, ignore_env=True).scan()
h = loader.select('hk-cpu').handle()
for mode in ('host', 'device'):
    h.pointer_mode = mode
    try:
        h.scal('2', A())
        print(mode, 'nothing')
    except Exception as e:
        print(mode, type(e).__name__)
''' % (os.path.join(ROOT, 'python'), os.path.join(BUILD, 'plugins'))
    rc, out = run([sys.executable, '-c', script], env=dict(clean_env()))
    want = 'host %s\ndevice %s' % (m.group(1), m.group(1))
    if out.strip() != want:
        problem('python/README.md', 'says an alpha of \'2\' raises %s; it gives:\n%s'
                % (m.group(1), out))


def main():
    with tempfile.TemporaryDirectory() as tmp:
        for doc in DOCS:
            text = open(os.path.join(ROOT, doc)).read()
            check_quoted(doc, text)
            for n, command, expected in samples(text):
                check_sample('%s:%d' % (doc, n), command, expected, tmp)
    if os.environ.get('HK_LOADER_LIBRARY'):
        check_python_alpha()
    for p in problems:
        print('FAIL ' + p)
    print('docs: %d command lines, %d options, %d samples run (%d not runnable here), '
          '%d problems' % (counts['commands'], counts['options'], counts['samples'],
                           counts['skipped'], len(problems)))
    # the result line the suite's runner reads: one check per document,
    # failed when it has a problem
    bad = len({p.split(':', 1)[0] for p in problems})
    print('%d passed, %d failed, 0 skipped' % (len(DOCS) - bad, bad))
    return 1 if problems else 0


if __name__ == '__main__':
    sys.exit(main())
