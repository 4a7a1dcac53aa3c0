#!/usr/bin/env bash
# Each third_party folder is a crates.io release with arl's changes; patches/<crate>-<version>.patch
# holds exactly those changes. Usage:
#   third_party/patches.sh check   the folders equal the published crates + their patches (exit 1 if not)
#   third_party/patches.sh make    rewrite the patches from the folders (after changing a folder)
# Upgrading a crate: fetch the new release, `patch -p1 < patches/<crate>-<old>.patch` inside it, fix
# the rejects, replace the folder, rename the patch, update CRATES below and third_party/README.md.
# The .crate files come from static.crates.io, checked against the sha256 below, cached in
# ~/.cache/arl/crates.
set -euo pipefail
cd "$(dirname "$0")"

# folder  version  sha256 of the .crate  files of the release the folder leaves out
CRATES=(
  "burn-flex 0.21.0 0098bf6555c151517b4c98ca0e8ed1ab6a976e40f5f4e967c117b00eee21e192 ACKNOWLEDGMENTS.md ARCHITECTURE.md BENCHMARKS.md COMPARISON.md"
  "burn-autodiff 0.21.0 3b93a80e43bfab909399444b29ce3894ff51f7e879720bfc75b6007ae6a01c3d"
  "cubek-matmul 0.2.0 83a4cea5f0f439907dc953c7638a6204b3f055f1bcbd10db91dfc5faa030ac1c tests"
)
# Packaging files cargo adds to every .crate.
ALWAYS_LEFT_OUT=(.cargo_vcs_info.json Cargo.lock Cargo.toml.orig)

cache="${ARL_CACHE_DIR:-$HOME/.cache/arl}/crates"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The published release, unpacked into $work/orig/<crate> without the left-out files.
published() {
    local name=$1 version=$2 sha=$3; shift 3
    local file="$cache/$name-$version.crate"
    mkdir -p "$cache" "$work/orig"
    if [ ! -f "$file" ] || ! echo "$sha  $file" | sha256sum -c --quiet - 2>/dev/null; then
        curl -sSfL -o "$file.tmp" "https://static.crates.io/crates/$name/$name-$version.crate"
        echo "$sha  $file.tmp" | sha256sum -c --quiet - || { echo "patches.sh: $name-$version.crate does not match its sha256" >&2; exit 1; }
        mv "$file.tmp" "$file"
    fi
    tar xzf "$file" -C "$work/orig"
    mv "$work/orig/$name-$version" "$work/orig/$name"
    for f in "${ALWAYS_LEFT_OUT[@]}" "$@"; do rm -rf "${work:?}/orig/$name/$f"; done
}

mode=${1:-check}
status=0
for entry in "${CRATES[@]}"; do
    read -r name version sha left_out <<<"$entry"
    # shellcheck disable=SC2086 # the left-out list splits into words
    published "$name" "$version" "$sha" $left_out
    patch_file="patches/$name-$version.patch"
    case $mode in
        make)
            # Paths relative to the crate's root (a/src/…, b/src/…), as `patch -p1` inside it wants.
            (cd "$work/orig/$name" && diff -ruN . "$OLDPWD/$name" | sed -e "s#^--- \./#--- a/#" -e "s#^+++ $OLDPWD/$name/#+++ b/#" -e "s#^diff -ruN \./\([^ ]*\) .*#diff -ruN a/\1 b/\1#" -e "s#^\(---\|+++\) \([^\t]*\)\t.*#\1 \2#") > "$patch_file" || true
            echo "$patch_file: $(grep -c '^+++ ' "$patch_file") files"
            ;;
        check)
            (cd "$work/orig/$name" && patch -p1 --quiet --no-backup-if-mismatch < "$OLDPWD/$patch_file")
            if diff -r "$work/orig/$name" "$name" >/dev/null; then
                echo "third_party/$name = $name $version + $patch_file"
            else
                echo "third_party/$name differs from $name $version + $patch_file; after changing the folder run third_party/patches.sh make" >&2
                diff -rq "$work/orig/$name" "$name" >&2 || true
                status=1
            fi
            ;;
        *) echo "usage: third_party/patches.sh check|make" >&2; exit 2 ;;
    esac
done
exit $status
