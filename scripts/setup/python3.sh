#!/usr/bin/env bash
# The `rlimit` sandbox runs jobs as an unprivileged uid, so it needs a system python3 that
# such a user can execute (a pyenv or venv under /root will not do). Idempotent.
set -euo pipefail
for candidate in /usr/bin/python3 /usr/local/bin/python3 /bin/python3; do
    if [ -x "$candidate" ] && [ "$(stat -L -c %a "$candidate" | tail -c 2)" != "0" ]; then
        echo "system python3: $candidate ($("$candidate" --version 2>&1))"
        exit 0
    fi
done
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    apt-get update -qq && apt-get install -y -qq python3
else
    echo "error: no system python3; install one (e.g. sudo apt-get install -y python3)" >&2
    exit 1
fi
