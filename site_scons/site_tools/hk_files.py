"""SCons tool: symbolic links and filled-in templates.

env.HkSymlink(link, points_to) makes the file node `link` a symbolic link whose
text is `points_to` (usually a bare file name or a relative path, so that the
tree can be moved). It is remade when the text changes.
env.HkTemplate(target, template, values) writes `template` with every @NAME@
replaced by values['NAME']; a name without a value is an error, so a template
and its callers cannot drift apart silently.
"""
import os
import re

import SCons.Action
import SCons.Errors


def _make_link(target, source, env):
    path = target[0].abspath
    if os.path.lexists(path):
        os.unlink(path)
    os.symlink(source[0].read(), path)
    return 0


def _hk_symlink(env, link, points_to):
    link = env.File(link)
    # SCons.Action, not env.Action: env.Action would substitute $TARGET at once.
    return env.Command(link, env.Value(points_to),
                       SCons.Action.Action(_make_link, 'LN     $TARGET'))


def _fill(target, source, env):
    values = source[1].read()
    text = source[0].get_text_contents()
    missing = sorted(set(n for n in re.findall(r'@([A-Za-z_][A-Za-z0-9_]*)@', text)
                         if n not in values))
    if missing:
        raise SCons.Errors.UserError('%s: no value for %s' % (source[0], ', '.join(missing)))
    text = re.sub(r'@([A-Za-z_][A-Za-z0-9_]*)@', lambda m: values[m.group(1)], text)
    with open(target[0].abspath, 'w') as f:
        f.write(text)
    return 0


def _hk_template(env, target, template, values):
    return env.Command(target, [env.File(template), env.Value(dict(values))],
                       SCons.Action.Action(_fill, 'GEN    $TARGET'))


def generate(env):
    env.AddMethod(_hk_symlink, 'HkSymlink')
    env.AddMethod(_hk_template, 'HkTemplate')


def exists(env):
    return True
