#!/usr/bin/env python3
"""Strict check of one JSON document on stdin, for the hk-host tests.

usage: json_check.py EXPR...
The input must be UTF-8, hold exactly one JSON value, no NaN or Infinity, no
object with a key twice, and no raw control character but the line breaks
between values. Then every EXPR (Python, with the document as `d`) must be
true. Exit status 0, or 1 with the first problem on stderr.
"""
import json
import sys


def no_constants(name):
    raise ValueError('not JSON: %s' % name)


def unique_keys(pairs):
    keys = [k for k, _ in pairs]
    dup = {k for k in keys if keys.count(k) > 1}
    if dup:
        raise ValueError('key %r appears twice in one object' % sorted(dup)[0])
    return dict(pairs)


def main():
    raw = sys.stdin.buffer.read()
    try:
        text = raw.decode('utf-8')
        bad = [c for c in text if (ord(c) < 0x20 and c != '\n') or 0x7f <= ord(c) <= 0x9f]
        if bad:
            raise ValueError('raw control character %r in the output' % bad[0])
        d = json.loads(text, parse_constant=no_constants, object_pairs_hook=unique_keys)
    except ValueError as e:  # UnicodeDecodeError and JSONDecodeError included
        print('json_check: %s\n--- input:\n%s' % (e, raw[:4000].decode('utf-8', 'replace')),
              file=sys.stderr)
        return 1
    for expr in sys.argv[1:]:
        try:
            ok = eval(expr, {'d': d})
        except Exception as e:  # a missing member is a failed expectation
            ok, why = False, '%s: %s' % (type(e).__name__, e)
        else:
            why = 'false'
        if not ok:
            print('json_check: %s: %s\n--- document:\n%s'
                  % (expr, why, json.dumps(d, indent=1)[:4000]), file=sys.stderr)
            return 1
    return 0


if __name__ == '__main__':
    sys.exit(main())
