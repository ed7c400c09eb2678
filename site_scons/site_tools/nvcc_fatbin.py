"""SCons tool: CUDA kernels -> one fatbin, and a fatbin -> an object to link.

env.HkFatbin(target, sources) compiles every .cu in sources, as one translation
unit (a generated file that includes each of them), into a fatbin holding SASS
for each SM in $cuda_arch and PTX for the highest, so newer GPUs can JIT it.
env.HkEmbed(target, blob, symbol) assembles blob into an object file whose
read-only, 64-byte aligned, hidden symbol `symbol` holds its bytes and
`symbol`_end marks their end. Editing any kernel rebuilds the fatbin, and so the
object and everything that links it.
"""
import os
import shutil

import SCons.Action
import SCons.Scanner.C


def _nvcc_path(env):
    home = env.get('cuda_home', '/usr/local/cuda')
    cand = os.path.join(home, 'bin', 'nvcc')
    if os.path.exists(cand):
        return cand
    return shutil.which('nvcc')


def _gencode(env):
    archs = [a.strip() for a in str(env.get('cuda_arch', '90')).split(',') if a.strip()]
    flags = []
    for a in archs:
        flags.append('-gencode=arch=compute_%s,code=sm_%s' % (a, a))
    top = max(archs, key=int)
    flags.append('-gencode=arch=compute_%s,code=compute_%s' % (top, top))
    return flags


def _write_unity(target, source, env):
    with open(target[0].abspath, 'w') as f:
        f.write('/* generated: every kernel source as one translation unit */\n')
        for s in source:
            f.write('#include "%s"\n' % s.srcnode().abspath)
    return 0


def _hk_fatbin(env, target, sources):
    target = env.File(target)
    unity = env.File(target.abspath + '.unity.cuh')  # not *.cu: kernel globs must not see it
    # SCons.Action, not env.Action: env.Action would substitute $TARGET now, while
    # there is no target yet, and print an empty name.
    env.Command(unity, sources, SCons.Action.Action(_write_unity, 'GEN    $TARGET'))
    # The unity file includes the kernels by absolute path; depend on them so the
    # C scanner's findings and direct edits both trigger a rebuild.
    nvcc = env['NVCC']
    flags = ' '.join(_gencode(env))
    cmd = ('"%s" -x cu -fatbin -std=c++17 -O3 -lineinfo %s $NVCCFLAGS -o $TARGET $SOURCE'
           % (nvcc, flags))
    out = env.Command(target, unity, SCons.Action.Action(cmd, '$NVCCCOMSTR'))
    env.Depends(out, sources)
    env.Depends(out, env.Value(flags))
    return out


def _hk_embed(env, target, blob, symbol):
    blob = env.File(blob)
    asm = env.File('#site_scons/hk_embed.S')
    obj = env.Object(target, asm,
                     CPPDEFINES=env['CPPDEFINES'] + [
                         ('HK_EMBED_FILE', '\\"%s\\"' % blob.abspath),
                         ('HK_EMBED_SYMBOL', symbol)])
    env.Depends(obj, blob)
    return obj


def generate(env):
    env['NVCC'] = _nvcc_path(env) or 'nvcc'
    env['HK_HAVE_NVCC'] = _nvcc_path(env) is not None
    env.SetDefault(NVCCFLAGS='')
    scanner = SCons.Scanner.C.CScanner()
    for suffix in ('.cu', '.cuh'):  # the unity file is .cuh; headers are .cuh
        SCons.Tool.SourceFileScanner.add_scanner(suffix, scanner)
    env.AddMethod(_hk_fatbin, 'HkFatbin')
    env.AddMethod(_hk_embed, 'HkEmbed')


def exists(env):
    return True
