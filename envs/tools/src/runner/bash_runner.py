# arl tools gym: runs one Bash call as `bash -c COMMAND` in the rlimit sandbox, whose job root
# has bash, common tools, a read-only pytest and `/repo -> /job/repo` (shell/real.rs).
# argv: CWD COMMAND BASH PYTHONPATH MAX_FILES MAX_BYTES TIMEOUT_MS
# The command's stdout and stderr go, merged as on a terminal, to fd 1. After it, fd 2 gets the
# report the host reads back: the working directory, then every file of /repo the command
# created, changed or deleted (at most MAX_FILES files and MAX_BYTES bytes; the rest is named
# as over the limit). The host checks the report again; a command can only write its own repo.
# The runner makes itself non-dumpable first: the command runs as the same uid, and would
# otherwise reach the report's pipe through /proc/1/fd/2 (or the runner's memory through
# /proc/1/mem); the sandbox's seccomp filter refuses pidfd_getfd and ptrace besides.
import ctypes
import os
import signal
import stat
import sys

JOB = "/job"
REPO = "/job/repo"
SHOWN = "/repo"
SKIP_DIRS = ("__pycache__",)
# Entries named over a limit (the report must fit the job's 64 KiB of stderr).
MAX_OVER_LINES = 20


def snapshot():
    files = {}
    for base, dirs, names in os.walk(REPO):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS)
        for name in names:
            path = os.path.join(base, name)
            rel = os.path.relpath(path, REPO)
            try:
                st = os.lstat(path)
            except OSError:
                continue
            if not stat.S_ISREG(st.st_mode):
                files[rel] = None
                continue
            if name.endswith(".pyc"):
                continue
            try:
                with open(path, "rb") as f:
                    files[rel] = f.read(1 << 20)
            except OSError:
                files[rel] = None
    return files


def shown(path):
    if path == REPO or path.startswith(REPO + "/"):
        return SHOWN + path[len(REPO):]
    return path


def not_dumpable():
    # prctl(PR_SET_DUMPABLE, 0): /proc/1/{fd,mem,environ} and ptrace-mode access to this
    # process need CAP_SYS_PTRACE, which no process of the job has. Reset by execve, so the
    # command's own processes stay ordinary.
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(4, 0, 0, 0, 0) != 0:
        sys.stderr.write("arl: prctl(PR_SET_DUMPABLE) failed: errno %d\n" % ctypes.get_errno())
        os._exit(126)


def main():
    not_dumpable()
    cwd, command, bash, pythonpath, max_files, max_bytes, timeout_ms = sys.argv[1:8]
    max_files, max_bytes = int(max_files), int(max_bytes)
    before = snapshot()
    os.makedirs(JOB + "/.arl/bin")
    os.symlink(sys.executable, JOB + "/.arl/bin/python")
    with open(JOB + "/.arl/bin/pytest", "w") as f:
        f.write("#!%s\nimport sys\nfrom pytest import console_main\nsys.argv[0] = 'pytest'\nsys.exit(console_main())\n" % sys.executable)
    os.chmod(JOB + "/.arl/bin/pytest", 0o755)
    reset = ""
    physical = REPO + cwd[len(SHOWN):] if cwd == SHOWN or cwd.startswith(SHOWN + "/") else cwd
    try:
        os.chdir(physical)
    except OSError:
        reset = SHOWN
        os.chdir(REPO)
        cwd = SHOWN
    env = {
        "PATH": JOB + "/.arl/bin:/usr/local/bin:/usr/bin:/bin",
        "HOME": JOB,
        "LANG": "C.UTF-8",
        "PWD": cwd,
        "TERM": "dumb",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONPATH": pythonpath,
        "SHELL": bash,
        "USER": "user",
    }
    if not pythonpath:
        del env["PYTHONPATH"]
    script = "trap 'pwd >%s/.arl/cwd' EXIT; %s" % (JOB, command)
    sys.stdout.flush()
    pid = os.fork()
    if pid == 0:
        try:
            # As a fresh process has them (Python ignores these; children would inherit that).
            for sig in (signal.SIGPIPE, signal.SIGXFSZ):
                signal.signal(sig, signal.SIG_DFL)
            os.dup2(1, 2)
            os.execve(bash, ["bash", "-c", script], env)
        finally:
            os._exit(127)
    timed_out = []

    def stop(signum, frame):
        # At the deadline: every other process of the job's PID namespace (we are its PID 1).
        timed_out.append(True)
        os.kill(-1, signal.SIGKILL)

    signal.signal(signal.SIGALRM, stop)
    signal.setitimer(signal.ITIMER_REAL, int(timeout_ms) / 1000.0)
    _, status = os.waitpid(pid, 0)
    signal.setitimer(signal.ITIMER_REAL, 0)
    code = os.waitstatus_to_exitcode(status)
    if code < 0:
        code = 128 - code
    try:
        with open(JOB + "/.arl/cwd") as f:
            cwd = f.read().strip() or cwd
    except OSError:
        pass
    after = snapshot()
    out = ["ARL-BASH-REPORT 1", "cwd\t" + shown(cwd).replace("\n", "?").replace("\t", "?"), "reset\t" + reset]
    if timed_out:
        out.append("timeout")
    sent_files, sent_bytes, over = 0, 0, [0]

    def refuse(rel, why):
        over[0] += 1
        if over[0] <= MAX_OVER_LINES:
            out.append("over\t%s\t%s" % (rel, why))

    for rel in sorted(set(before) | set(after)):
        old, new = before.get(rel), after.get(rel, b"")
        if "\n" in rel or "\t" in rel:
            refuse(ascii(rel).replace("\\t", " ").replace("\\n", " "), "a name with a tab or newline")
            continue
        if rel not in after:
            out.append("deleted\t" + rel)
            continue
        if rel in before and old == new:
            continue
        if new is None:
            refuse(rel, "not a regular file (kept in this call only)")
            continue
        try:
            text = new.decode("utf-8")
        except UnicodeDecodeError:
            refuse(rel, "not UTF-8 text")
            continue
        if sent_files + 1 > max_files or sent_bytes + len(new) > max_bytes:
            refuse(rel, "%d bytes; at most %d files and %d bytes come back per call" % (len(new), max_files, max_bytes))
            continue
        sent_files += 1
        sent_bytes += len(new)
        out.append("file\t%s\t%d" % (rel, len(text)))
        out.append(text)
    if over[0] > MAX_OVER_LINES:
        out.append("over\t(%d more changed files)\tnot listed" % (over[0] - MAX_OVER_LINES))
    out.append("end")
    sys.stderr.write("\n".join(out) + "\n")
    sys.stderr.flush()
    os._exit(code)


main()
