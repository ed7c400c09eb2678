"""The handlekit wheel: the Python package with the kit it runs on.

write_wheel(path, version, files, scripts) writes a wheel (a zip file laid
out as PEP 427 says) holding
  handlekit/*.py                          the package, as in python/handlekit
  handlekit/_kit/<path>                   the native files, each (source, path)
                                          pair of files, executables kept
                                          executable
  handlekit-VERSION.dist-info/            METADATA, WHEEL, entry_points.txt
                                          (the console scripts), RECORD
The wheel is reproducible: entries in a fixed order with a fixed date. Its
tag is py3-none-linux_<machine>: the native files are built here, and
`auditwheel show` names the manylinux tag they meet (python/SConscript).
"""
import base64
import hashlib
import io
import os
import platform
import zipfile

_DATE = (2020, 1, 1, 0, 0, 0)


def wheel_name(version):
    return 'handlekit-%s-py3-none-linux_%s.whl' % (version, platform.machine())


def _metadata(version, summary):
    return ('Metadata-Version: 2.1\nName: handlekit\nVersion: %s\nSummary: %s\n'
            'License: MIT\nRequires-Python: >=3.8\n' % (version, summary))


def _wheel_file():
    return ('Wheel-Version: 1.0\nGenerator: handlekit (site_scons/hk_wheel.py)\n'
            'Root-Is-Purelib: false\nTag: py3-none-linux_%s\n' % platform.machine())


def _entry_points(scripts):
    lines = ['[console_scripts]'] + ['%s = %s' % (name, target)
                                     for name, target in sorted(scripts.items())]
    return '\n'.join(lines) + '\n'


def _digest(data):
    raw = hashlib.sha256(data).digest()
    return 'sha256=' + base64.urlsafe_b64encode(raw).rstrip(b'=').decode()


def write_wheel(path, version, summary, files, scripts):
    """files: (source file, path in the wheel) pairs; scripts: console
    script name -> 'module:function'."""
    info = 'handlekit-%s.dist-info' % version
    entries = []
    for src, arc in sorted(files, key=lambda f: f[1]):
        with open(src, 'rb') as f:
            data = f.read()
        mode = 0o755 if os.stat(src).st_mode & 0o111 else 0o644
        entries.append((arc, data, mode))
    entries.append((info + '/METADATA', _metadata(version, summary).encode(), 0o644))
    entries.append((info + '/WHEEL', _wheel_file().encode(), 0o644))
    entries.append((info + '/entry_points.txt', _entry_points(scripts).encode(), 0o644))
    record = io.StringIO()
    for arc, data, _ in entries:
        record.write('%s,%s,%d\n' % (arc, _digest(data), len(data)))
    record.write('%s/RECORD,,\n' % info)
    entries.append((info + '/RECORD', record.getvalue().encode(), 0o644))
    tmp = path + '.part'
    with zipfile.ZipFile(tmp, 'w', zipfile.ZIP_DEFLATED) as z:
        for arc, data, mode in entries:
            zi = zipfile.ZipInfo(arc, _DATE)
            zi.external_attr = (0o100000 | mode) << 16
            zi.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(zi, data)
    os.replace(tmp, path)
