# arl tools gym: runs `python FILE [ARGS]` or `python -c CODE [ARGS]` as python would (the
# script's directory, or the working directory for -c, first on sys.path; __name__ ==
# "__main__"), under `python3 -I -S -B` in the sandbox. Tracebacks name files as the model
# sees them, under /repo, and leave this wrapper's own frame out.
# argv: file PATH [ARGS...] | code CODE [ARGS...]
import os
import sys
import traceback

ROOT = "/repo"


def main():
    kind, target, args = sys.argv[1], sys.argv[2], sys.argv[3:]
    cwd = os.getcwd()
    if kind == "file":
        path = os.path.join(cwd, target)
        with open(path, encoding="utf-8") as f:
            source = f.read()
        filename = ROOT + "/" + target
        sys.path.insert(0, os.path.dirname(path))
        sys.argv = [filename] + args
    else:
        source, filename = target, "<string>"
        sys.path.insert(0, cwd)
        sys.argv = ["-c"] + args
    scope = {"__name__": "__main__", "__file__": filename, "__builtins__": __builtins__}
    try:
        exec(compile(source, filename, "exec"), scope)
    except SystemExit:
        raise
    except BaseException as e:
        sys.stdout.flush()
        lines = traceback.format_exception(type(e), e, e.__traceback__.tb_next)
        sys.stderr.write(from_job("".join(lines), cwd, ROOT + "/"))
        sys.stderr.flush()
        os._exit(1)


main()
