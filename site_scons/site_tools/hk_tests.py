"""SCons tool: register CUnit test programs and run them all under one alias.

env.HkTest(name, program, args=[], envvars={}) records one run of a test program
(the same program may be recorded several times with other environments, e.g.
2 and 4 simulated devices). env.HkTestAlias('test') makes `scons test` build
every recorded program and run them through site_scons/hk_runtests.py, which
prints each program's output and a closing total line.
"""
import json
import os
import sys

_RUNS = []


def _hk_test(env, name, program, args=None, envvars=None):
    prog = env.Flatten([program])[0]  # a Program() result is a node list
    prog = env.File(prog) if isinstance(prog, str) else prog
    _RUNS.append({'name': name, 'program': prog, 'args': list(args or []),
                  'env': dict(envvars or {})})
    return prog


def _write_manifest(target, source, env):
    runs = []
    for r in _RUNS:
        runs.append({'name': r['name'],
                     'argv': [r['program'].path] + [str(a) for a in r['args']],
                     'env': {k: str(v) for k, v in r['env'].items()}})
    with open(target[0].abspath, 'w') as f:
        json.dump(runs, f, indent=1)
    return 0


def _hk_test_alias(env, alias):
    manifest = env.File('#' + env['HK_BUILD'] + '/tests.json')
    env.Command(manifest, [], env.Action(_write_manifest, 'writing test manifest $TARGET'))
    env.AlwaysBuild(manifest)
    runner = env.File('#site_scons/hk_runtests.py')
    progs = [r['program'] for r in _RUNS]
    cmd = env.Command(alias + '-run', [manifest, runner] + progs,
                      '"%s" "%s" "%s"' % (sys.executable, runner.abspath, manifest.abspath))
    env.AlwaysBuild(cmd)
    env.Alias(alias, cmd)


def generate(env):
    env.AddMethod(_hk_test, 'HkTest')
    env.AddMethod(_hk_test_alias, 'HkTestAlias')


def exists(env):
    return True
