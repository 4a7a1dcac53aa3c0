# arl harness env: runs one episode's agent program as `bash -c COMMAND` in /repo, in the rlimit
# sandbox, whose job root has bash, the common tools and the endpoint's unix socket at
# /endpoint.sock (and nothing else to connect to). A relay thread listens on the job's own
# loopback and forwards each connection to that socket, so the program reaches its session as
# OPENAI_BASE_URL=http://127.0.0.1:PORT/v1 with OPENAI_API_KEY=its session id.
# argv: COMMAND BASH PYTHONPATH TIMEOUT_S SOURCE MODEL
# The program's stdout and stderr go to /job/harness.log. After it, fd 1 gets one JSON line the
# host reads: the exit status (or the signal), whether it was stopped at TIMEOUT_S, whether bash
# could not start, the final /repo/SOURCE (or null), and the log's tail.
# The runner makes itself non-dumpable first: the program runs as the same uid, and would
# otherwise reach the report's pipe through /proc/1/fd/1 (or the runner's memory).
import ctypes
import json
import os
import signal
import socket
import subprocess
import sys
import threading

ENDPOINT = "/endpoint.sock"
REPO = "/job/repo"
LOG = "/job/harness.log"
MAX_SOURCE = 48 * 1024
LOG_TAIL = 2048


def not_dumpable():
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(4, 0, 0, 0, 0) != 0:
        sys.stderr.write("arl: prctl(PR_SET_DUMPABLE) failed: errno %d\n" % ctypes.get_errno())
        os._exit(126)


def pump(src, dst):
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    for s in (dst, src):
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


def relay(listener):
    while True:
        try:
            client, _ = listener.accept()
        except OSError:
            return
        upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            upstream.connect(ENDPOINT)
        except OSError:
            client.close()
            continue
        for a, b in ((client, upstream), (upstream, client)):
            threading.Thread(target=pump, args=(a, b), daemon=True).start()


def tail(path):
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - LOG_TAIL))
            return f.read().decode("utf-8", "replace")
    except OSError:
        return ""


def main():
    not_dumpable()
    command, bash, pythonpath, timeout_s, source, model = sys.argv[1:7]
    key = sys.stdin.readline().strip()
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    port = listener.getsockname()[1]
    threading.Thread(target=relay, args=(listener,), daemon=True).start()
    with open("/job/task.md") as f:
        task = f.read()
    env = {
        "PATH": "/job/.arl/bin:/usr/local/bin:/usr/bin:/bin",
        "HOME": "/job",
        "LANG": "C.UTF-8",
        "PYTHONDONTWRITEBYTECODE": "1",
        "OPENAI_BASE_URL": "http://127.0.0.1:%d/v1" % port,
        "OPENAI_API_KEY": key,
        "ARL_MODEL": model,
        "ARL_TASK": task,
    }
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    os.makedirs("/job/.arl/bin")
    for name in ("python", "python3"):
        os.symlink(sys.executable, "/job/.arl/bin/" + name)
    report = {"exit": None, "signal": None, "timed_out": False, "not_started": None}
    with open(LOG, "wb") as log:
        try:
            p = subprocess.Popen([bash, "-c", command], cwd=REPO, env=env, stdin=subprocess.DEVNULL, stdout=log,
                                 stderr=subprocess.STDOUT, start_new_session=True)
        except OSError as e:
            report["not_started"] = "%s: %s" % (bash, e)
            p = None
        if p is not None:
            try:
                code = p.wait(timeout=float(timeout_s))
            except subprocess.TimeoutExpired:
                report["timed_out"] = True
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except OSError:
                    pass
                code = p.wait()
            if code < 0:
                report["signal"] = -code
            else:
                report["exit"] = code
    try:
        with open(os.path.join(REPO, source), "rb") as f:
            report["source"] = f.read(MAX_SOURCE + 1).decode("utf-8", "replace")
    except OSError:
        report["source"] = None
    report["log"] = tail(LOG)
    os.write(1, (json.dumps(report) + "\n").encode())


main()
