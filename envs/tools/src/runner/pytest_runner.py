# arl tools gym's test runner (pytest is not installed in the sandbox): collects plain
# `test*` functions and `Test*` classes' `test*` methods from the files named on stdin, in
# definition order, keeps those the -k expression selects, runs them, and prints one
# marked JSON line per event:
#   <marker> COLLECT {"path", "count"} | ERROR {"path", "error"} | DESELECT {"count"}
#   <marker> PASS {"id"} | FAIL {"id", "error", "line", "code"}
# A failing `assert a OP b` is reported as pytest would, `assert <a> OP <b>`. Verdicts are
# feedback for the model only; rewards never come from here.
import ast
import importlib.util
import json
import linecache
import os
import sys

_write = os.write
OPS = {ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=",
       ast.Is: "is", ast.IsNot: "is not", ast.In: "in", ast.NotIn: "not in"}


def selected(tree, node_id):
    if tree is None:
        return True
    op = tree[0]
    if op == "kw":
        return tree[1].lower() in node_id.lower()
    if op == "not":
        return not selected(tree[1], node_id)
    if op == "and":
        return selected(tree[1], node_id) and selected(tree[2], node_id)
    return selected(tree[1], node_id) or selected(tree[2], node_id)


def short(text, n=300):
    text = text.replace("\n", " ")
    return text if len(text) <= n else text[:n] + "..."


def explain(e, tb):
    """The error text; for a bare failing `assert a OP b`, the compared values."""
    name = type(e).__name__
    message = str(e)
    if isinstance(e, AssertionError) and not message and tb is not None:
        try:
            frame = tb.tb_frame
            code = linecache.getline(frame.f_code.co_filename, tb.tb_lineno).strip()
            node = ast.parse(code).body[0]
            if isinstance(node, ast.Assert) and isinstance(node.test, ast.Compare) and len(node.test.ops) == 1:
                env = dict(frame.f_globals)
                env.update(frame.f_locals)
                left = eval(compile(ast.Expression(node.test.left), "<assert>", "eval"), env)
                right = eval(compile(ast.Expression(node.test.comparators[0]), "<assert>", "eval"), env)
                message = "assert %s %s %s" % (short(repr(left), 120), OPS.get(type(node.test.ops[0]), "?"), short(repr(right), 120))
            elif isinstance(node, ast.Assert):
                message = "assert " + ast.unparse(node.test)
        except BaseException:
            pass
    return name + (": " + short(message) if message else "")


def main():
    request = json.loads(sys.stdin.read())
    marker = request["marker"]

    def out(kind, payload):
        _write(1, ("\n" + marker + " " + kind + " " + json.dumps(payload) + "\n").encode("utf-8", "replace"))

    cwd = os.getcwd()
    sys.path.insert(0, cwd)
    tests = []
    deselected = 0
    for entry in request["files"]:
        path, only = entry["path"], entry.get("tests")
        full = os.path.join(cwd, path)
        name = os.path.splitext(os.path.basename(path))[0]
        directory = os.path.dirname(full)
        if directory not in sys.path:
            sys.path.insert(0, directory)
        try:
            spec = importlib.util.spec_from_file_location(name, full)
            module = importlib.util.module_from_spec(spec)
            sys.modules[name] = module
            spec.loader.exec_module(module)
        except BaseException as e:
            tb = e.__traceback__
            while tb is not None and tb.tb_next is not None:
                tb = tb.tb_next
            where = (" (line %d)" % tb.tb_lineno) if tb is not None else ""
            out("ERROR", {"path": path, "error": from_job(explain(e, None), cwd, "/repo/") + where})
            continue
        found = []
        for attr, value in list(vars(module).items()):
            if attr.startswith("test") and callable(value) and not isinstance(value, type):
                found.append((path + "::" + attr, value))
            elif attr.startswith("Test") and isinstance(value, type):
                for method in list(vars(value)):
                    if method.startswith("test") and callable(getattr(value, method)):
                        found.append((path + "::" + attr + "::" + method, (value, method)))
        kept = []
        for node_id, fn in found:
            short_id = node_id[len(path) + 2:]
            if only is not None and short_id not in only and short_id.split("::")[0] not in only:
                continue
            if selected(request.get("select"), node_id):
                kept.append((node_id, fn))
            else:
                deselected += 1
        out("COLLECT", {"path": path, "count": len(kept)})
        tests.extend(kept)
    if deselected:
        out("DESELECT", {"count": deselected})
    for node_id, fn in tests:
        try:
            if isinstance(fn, tuple):
                getattr(fn[0](), fn[1])()
            else:
                fn()
            out("PASS", {"id": node_id})
        except BaseException as e:
            tb = e.__traceback__
            while tb is not None and tb.tb_next is not None:
                tb = tb.tb_next
            line, code = None, ""
            if tb is not None:
                line = tb.tb_lineno
                code = linecache.getline(tb.tb_frame.f_code.co_filename, tb.tb_lineno).strip()
                where = from_job(tb.tb_frame.f_code.co_filename, cwd, "")
            else:
                where = ""
            out("FAIL", {"id": node_id, "error": explain(e, tb), "line": line, "code": code, "file": where})
            if request.get("exitfirst"):
                break


main()
