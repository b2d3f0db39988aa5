#!/usr/bin/env bash
# ci/gpu-pack.sh - prepares .gpu/eval/ (git-ignored) for ci/gpu-eval.sh on the GPU machine, which
# has no libgit2, libmicrohttpd or jansson headers: the abgate binary built here with every
# library it loads (../shared/tools/pack-libs.sh does the ldd walk), jansson's and libmicrohttpd's
# Debian packages for ember's source builds there, Debian's bubblewrap for the sandbox, and a bare copy of this repository with the experiment branches
# of ci/gpu-experiments.sh.
#   usage: ci/gpu-pack.sh [BUILD_DIR]       (default build/; abgate must be built there)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
dest=.gpu/eval
rm -rf "$dest"
mkdir -p "$dest/bin" "$dest/lib" "$dest/deb"
cp "$build/bin/abgate" "$dest/bin/"
# abgate finds the relay for HTTP SUTs in the sandbox beside itself (libc only, nothing to pack).
cp "$build/bin/abgate-relay" "$dest/bin/"
# jq for ci/sandbox-overhead.sh (tests/integration/lib.sh reads results with it; the image has none).
command -v jq >/dev/null && cp "$(command -v jq)" "$dest/bin/"
pack=../shared/tools/pack-libs.sh
for bin in "$dest"/bin/abgate "$dest"/bin/jq; do
  [ -f "$bin" ] || continue
  if [ -x "$pack" ] || [ -f "$pack" ]; then
    bash "$pack" "$dest/lib" "$bin"
  else
    ldd "$bin" | awk '/=> \// {print $3}' | grep -vE '/lib(c|m|dl|rt|pthread)\.so|ld-linux' |
      xargs -I{} cp -L -n {} "$dest/lib/"
  fi
done
# ember's build there needs jansson's headers, and libmicrohttpd's for `ember serve --http`
(cd "$dest/deb" && apt-get download libjansson-dev libjansson4 libmicrohttpd-dev libmicrohttpd12 >/dev/null 2>&1) ||
  echo "gpu-pack: could not download the jansson/libmicrohttpd packages (ember will need their headers there)" >&2
# bubblewrap for the sandbox (the GPU image has none); gpu_bwrap_setup unpacks it there.
mkdir -p "$dest/deb-bwrap"
(cd "$dest/deb-bwrap" && apt-get download bubblewrap >/dev/null 2>&1) ||
  echo "gpu-pack: could not download bubblewrap (evaluations there will need --no-sandbox)" >&2
git clone -q --bare . "$dest/repo.git"
bash ci/gpu-experiments.sh "$dest/repo.git"
du -sh "$dest" | awk '{print "gpu-pack: " $1 " in " $2}'
