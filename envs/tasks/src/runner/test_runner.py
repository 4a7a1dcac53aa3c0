# arl's public-test runner (pytest is not available under `python3 -S`): imports the test
# module named on stdin, runs every plain `test_*` function in definition order, and prints
# "<marker> PASS <name>" or "<marker> FAIL <name> <detail>" per test. Its verdicts are shown
# to the model as feedback; rewards never come from here (see grade_runner.py).
import importlib
import json
import linecache
import os
import sys

_write = os.write


def main():
    request = json.loads(sys.stdin.read())
    marker, module = request["marker"], request["module"]

    def out(line):
        _write(1, ("\n" + marker + " " + line.replace("\n", " ") + "\n").encode("utf-8", "replace"))

    sys.path.insert(0, os.getcwd())
    try:
        tests = importlib.import_module(module)
    except BaseException as e:
        out("ERROR import " + type(e).__name__ + ": " + str(e)[:200])
        return
    names = [n for n, v in list(vars(tests).items()) if n.startswith("test") and callable(v)]
    for name in names:
        try:
            getattr(tests, name)()
            out("PASS " + name)
        except BaseException as e:
            tb = e.__traceback__
            while tb is not None and tb.tb_next is not None:
                tb = tb.tb_next
            where = ""
            if tb is not None:
                code = linecache.getline(tb.tb_frame.f_code.co_filename, tb.tb_lineno).strip()
                where = " at line " + str(tb.tb_lineno) + ": " + code
            message = str(e)[:200]
            out("FAIL " + name + " " + type(e).__name__ + (": " + message if message else "") + where)


main()
