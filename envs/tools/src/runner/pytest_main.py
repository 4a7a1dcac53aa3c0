# arl tools gym: real pytest where the sandbox has no shell (wasm). The repository is at
# /repo (the working directory) and pytest with its dependencies is importable from the
# directory in argv[1]; argv[2] is the program name usage messages show (`pytest`, or
# `__main__.py` for `python -m pytest`); the rest is the model's pytest arguments.
import os
import sys

sys.path.insert(0, sys.argv[1])
os.chdir("/repo")
args = sys.argv[3:]
sys.argv = [sys.argv[2]] + args
# WASI has no umask or chmod; pytest's cache calls both when it makes `.pytest_cache`.
if not hasattr(os, "umask"):
    os.umask = lambda mask: 0o022
if not hasattr(os, "chmod"):
    os.chmod = lambda *args, **kwargs: None
import pytest

# WASI has no dup(): output is captured through sys (a later -s / --capture=no still wins),
# and faulthandler, which dups stderr, is off. The cache is written into /repo as pytest
# does, but each job's filesystem is fresh, so it is empty at every call.
sys.exit(pytest.main(["-p", "no:faulthandler", "--capture=sys"] + args))
