"""SCons tool: register test programs and run them all under one alias.

env.HkTest(name, program, args=[], envvars={}, interpreter=None, deps=[]) records
one run of a test program (the same program may be recorded several times with
other environments, e.g. 2 and 4 simulated devices). With interpreter (e.g.
sys.executable) the program is a script run by it; deps are further nodes the
run needs built first (a staged install, plugins). Every program must end with
a line "N passed, N failed, N skipped". env.HkPreloadEnv() gives the variables
a script needs in a sanitizer build. env.HkTestAlias('test') makes
`scons test` build every recorded program and run them through
site_scons/hk_runtests.py, which prints each program's output and a closing
total line.
"""
import json
import os
import subprocess
import sys

import SCons.Action

_RUNS = []


def _hk_test(env, name, program, args=None, envvars=None, interpreter=None, deps=None):
    prog = env.Flatten([program])[0]  # a Program() result is a node list
    prog = env.File(prog) if isinstance(prog, str) else prog
    _RUNS.append({'name': name, 'program': prog, 'args': list(args or []),
                  'env': dict(envvars or {}), 'interpreter': interpreter,
                  'deps': env.Flatten([deps or []])})
    return prog


def _manifest_text():
    runs = []
    for r in _RUNS:
        lead = [str(r['interpreter'])] if r['interpreter'] else []
        runs.append({'name': r['name'],
                     'argv': lead + [r['program'].path] + [str(a) for a in r['args']],
                     'env': {k: str(v) for k, v in r['env'].items()}})
    return json.dumps(runs, indent=1)


def _write_manifest(target, source, env):
    with open(target[0].abspath, 'w') as f:
        f.write(source[0].read())
    return 0


def _hk_test_alias(env, alias):
    manifest = env.File('#' + env['HK_BUILD'] + '/tests.json')
    # The manifest's text is its source: it is rewritten only when a run changes.
    # SCons.Action, not env.Action: env.Action would substitute $TARGET at once.
    env.Command(manifest, env.Value(_manifest_text()),
                SCons.Action.Action(_write_manifest, 'GEN    $TARGET'))
    runner = env.File('#site_scons/hk_runtests.py')
    progs = [r['program'] for r in _RUNS] + [d for r in _RUNS for d in r['deps']]
    run = '"%s" "%s" "%s"' % (sys.executable, runner.abspath, manifest.abspath)
    cmd = env.Command(alias + '-run', [manifest, runner] + progs,
                      SCons.Action.Action(run, '$HKTESTCOMSTR'))
    env.AlwaysBuild(cmd)
    env.Alias(alias, cmd)


_RUNTIMES = (('address', 'libasan.so'), ('thread', 'libtsan.so'), ('leak', 'liblsan.so'),
             ('undefined', 'libubsan.so'))  # libasan first: it must be loaded first


def _hk_preload_env(env):
    """Variables that let a program built without the sanitizers (python3) load
    this build's instrumented libraries: their runtimes preloaded, and leak
    checking off (the interpreter's own memory is never freed). {} without
    sanitizers."""
    san = env.get('HK_SANITIZE') or []
    paths = []
    for name, lib in _RUNTIMES:
        if name in san:
            out = subprocess.run([env.subst('$CC'), '-print-file-name=' + lib],
                                 stdout=subprocess.PIPE, text=True).stdout.strip()
            paths.append(out or lib)
    if not paths:
        return {}
    return {'LD_PRELOAD': ' '.join(paths), 'ASAN_OPTIONS': 'detect_leaks=0',
            'LSAN_OPTIONS': 'detect_leaks=0'}


def generate(env):
    env.AddMethod(_hk_preload_env, 'HkPreloadEnv')
    env.AddMethod(_hk_test, 'HkTest')
    env.AddMethod(_hk_test_alias, 'HkTestAlias')


def exists(env):
    return True
