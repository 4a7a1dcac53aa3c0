# arl's hidden-test runner. It reads {"marker", "module", "function", "cases"} from stdin,
# calls the function once per case and prints ONLY what it returned, in a plain serialized
# form, one line per case: "<marker> <index> ok <json>" (or "raise <Type>",
# "unserializable <Type>"). It never sees an expected value and never decides pass/fail: the
# grader, outside the sandbox, compares the values. Only exact builtin types serialize, so an
# object with a rigged __eq__ or __repr__ is "unserializable", never equal to anything.
import importlib
import json
import os
import sys
from json import encoder as _encoder

_write = os.write
_type = type
_loads = json.loads
_enc = _encoder.encode_basestring_ascii
_frepr = float.__repr__
_irepr = int.__repr__
_INF = float("inf")


class _Unserializable(Exception):
    pass


def _ser(x, depth=0):
    if depth > 64:
        raise _Unserializable("depth")
    ty = _type(x)
    if x is None:
        return "null"
    if ty is bool:
        return "true" if x else "false"
    if ty is int:
        return _irepr(x)
    if ty is float:
        if x != x or x == _INF or x == -_INF:
            return '{"__float__": "' + _frepr(x) + '"}'
        return _frepr(x)
    if ty is str:
        return _enc(x)
    if ty is list or ty is tuple:
        return "[" + ", ".join([_ser(e, depth + 1) for e in x]) + "]"
    if ty is dict:
        parts = []
        for k, v in dict.items(x):
            if _type(k) is not str:
                raise _Unserializable("key")
            parts.append(_enc(k) + ": " + _ser(v, depth + 1))
        return "{" + ", ".join(parts) + "}"
    raise _Unserializable("value")


def _name(e):
    name = _type(e).__name__
    if _type(name) is not str:
        return "?"
    return "".join([c for c in name if c.isalnum() or c == "_"])[:60] or "?"


def main():
    request = _loads(sys.stdin.read())
    marker = request["marker"]
    module, function, cases = request["module"], request["function"], request["cases"]
    del request

    def out(line):
        _write(1, ("\n" + marker + " " + line + "\n").encode("ascii", "replace"))

    # The harness is up: from here on, a crash or a timeout is the candidate's.
    out("ready")
    sys.path.insert(0, os.getcwd())
    try:
        fn = getattr(importlib.import_module(module), function)
    except BaseException as e:
        out("import " + _name(e))
        return
    for i, case in enumerate(cases):
        try:
            got = fn(*_loads(case))
            try:
                line = "ok " + _ser(got)
            except _Unserializable:
                line = "unserializable " + _name(got)
        except BaseException as e:
            line = "raise " + _name(e)
        out(str(i) + " " + line)


main()
