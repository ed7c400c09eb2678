"""SCons tool: one short line per build step unless verbose=1.

By default every compile, link, archive, install and generator step prints one
line naming the step and its target ("CC build/debug/x.o", "LINK hk-host"); with
verbose=1 the full commands are printed instead. Steps that SCons runs as
Python functions always print their own short line (GEN, LN, ...): there is no
command to show.
"""

# Step name for each SCons command variable that has a *COMSTR twin.
_STEPS = {
    'CCCOM': 'CC', 'SHCCCOM': 'CC',
    'CXXCOM': 'CXX', 'SHCXXCOM': 'CXX',
    'ASCOM': 'AS', 'ASPPCOM': 'AS', 'SHASCOM': 'AS', 'SHASPPCOM': 'AS',
    'LINKCOM': 'LINK', 'SHLINKCOM': 'LINK', 'LDMODULECOM': 'LINK',
    'ARCOM': 'AR', 'RANLIBCOM': 'RANLIB',
    'NVCCCOM': 'NVCC',
    'HKTESTCOM': 'TEST',
}


def generate(env):
    verbose = bool(env.get('verbose', False))
    env['HK_VERBOSE'] = verbose
    if verbose:
        return
    for var, step in _STEPS.items():
        env[var + 'STR'] = '%-6s $TARGET' % step
    env['INSTALLSTR'] = 'INSTALL $TARGET'
    env['COMPILATIONDB_COMSTR'] = 'GEN    $TARGET'


def exists(env):
    return True
