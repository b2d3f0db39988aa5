# ci/gpu-lib.sh - sourced by the GPU-machine scripts (gpu-kernels.sh, gpu-decode-sweep.sh, gpu-eval.sh,
# gpu-calibrate.sh):
# their summary log, time-limited steps and model generation, and the jansson and bubblewrap setups.
#
# log MSG...: a timestamped line, to stdout and to $SUMMARY (set by the caller).
log() { echo "[$(date +%H:%M:%S) +${SECONDS}s] $*" | tee -a "$SUMMARY"; }

# run LOGFILE LIMIT_S NAME CMD...: runs CMD with a time limit, appends its output to LOGFILE,
# records PASS / SKIP (exit 77) / TIMEOUT / FAIL in the summary, and returns CMD's status.
run() {
	local logfile=$1 limit=$2 name=$3
	shift 3
	echo "===== $name: $*" >>"$logfile"
	timeout --kill-after=10 "$limit" "$@" >>"$logfile" 2>&1
	local rc=$?
	if [ $rc -eq 0 ]; then log "PASS $name"; elif [ $rc -eq 77 ]; then log "SKIP $name"; elif [ $rc -eq 124 ] || [ $rc -eq 137 ]; then log "TIMEOUT($limit s) $name"; else log "FAIL($rc) $name"; fi
	return $rc
}

# gen SHAPE QUANT: $MODELS/SHAPE-QUANT.gguf from `$EMBER gen --seed 1` unless it is already there
# (written beside and moved into place, so a cut-off run never leaves a partial model).
gen() {
	local f=$MODELS/$1-$2.gguf
	[ -s "$f" ] || { "$EMBER" gen --shape "$1" --quant "$2" --seed 1 -o "$f.tmp" && mv -f "$f.tmp" "$f"; }
}

# gpu_jansson_setup DEB_DIR: ember's build needs jansson's headers (and libmicrohttpd's, for
# `ember serve --http`) and the GPU image has neither. Debian packages carried in DEB_DIR
# (apt-get download libjansson-dev libjansson4 libmicrohttpd-dev libmicrohttpd12, as ci/gpu-pack.sh
# does) are unpacked into a private prefix ($JANSSON_ROOT, default /tmp/jansson-root) that
# pkg-config and the loader are pointed at; a library those packages need that the image lacks
# (libmicrohttpd's gnutls, found with ldd) is copied into the prefix from DEB_DIR/../lib, the
# libraries packed beside abgate. Does nothing when both are installed or no packages were carried.
#   usage: gpu_jansson_setup DEB_DIR; echo "$GPU_JANSSON_MSG"
# (call it in the current shell, not in $(...): it exports PKG_CONFIG_PATH and LD_LIBRARY_PATH)
gpu_jansson_setup() {
	local deb_dir=$1 root=${JANSSON_ROOT:-/tmp/jansson-root} d lib libdir missing
	GPU_JANSSON_MSG="jansson and libmicrohttpd are installed"
	pkg-config --exists jansson libmicrohttpd 2>/dev/null && return 0
	GPU_JANSSON_MSG="jansson or libmicrohttpd headers missing and no packages in $deb_dir"
	ls "$deb_dir"/*.deb >/dev/null 2>&1 || return 0
	for d in "$deb_dir"/*.deb; do dpkg -x "$d" "$root"; done
	libdir=$root/usr/lib/x86_64-linux-gnu
	# the prefix is moved, and shared linking needs no Requires.private (gnutls has no .pc there)
	sed -i -e "s|^prefix=.*|prefix=$root/usr|" -e '/^Requires.private:/d' "$libdir"/pkgconfig/*.pc
	export PKG_CONFIG_PATH=$libdir/pkgconfig:${PKG_CONFIG_PATH:-}
	export LD_LIBRARY_PATH=$libdir:${LD_LIBRARY_PATH:-}
	for lib in "$libdir"/*.so.*; do
		[ -f "$lib" ] || continue
		for missing in $(ldd "$lib" 2>/dev/null | awk '/not found/ {print $1}'); do
			[ -f "$deb_dir/../lib/$missing" ] && cp -L -n "$deb_dir/../lib/$missing" "$libdir/"
		done
	done
	missing=$(for lib in "$libdir"/*.so.*; do ldd "$lib" 2>/dev/null | awk '/not found/ {print $1}'; done | sort -u | tr '\n' ' ')
	GPU_JANSSON_MSG="$(cd "$deb_dir" && ls *.deb | sed 's/_.*//' | tr '\n' ' ')headers from the carried packages in $root${missing:+; still missing: $missing}"
}

# gpu_bwrap_setup DEB_DIR: the sandbox needs bubblewrap and the GPU image has none. Debian's
# package carried in DEB_DIR (ci/gpu-pack.sh) is unpacked into a private prefix put first on PATH
# (it needs only libc, libcap2 and libselinux1, which the image has); then `bwrap --version` and a
# sandboxed `nvidia-smi -L` with the device nodes bound in are tried, so a box whose kernel or
# container refuses namespaces says so before any evaluation starts.
#   usage: gpu_bwrap_setup DEB_DIR; echo "$GPU_BWRAP_MSG"     (in the current shell: it exports PATH)
gpu_bwrap_setup() {
	local deb_dir=$1 root=/tmp/bwrap-root d devs=()
	if ! command -v bwrap >/dev/null 2>&1; then
		GPU_BWRAP_MSG="no bwrap and no package in $deb_dir"
		ls "$deb_dir"/*.deb >/dev/null 2>&1 || return 1
		for d in "$deb_dir"/*.deb; do dpkg -x "$d" "$root"; done
		export PATH=$root/usr/bin:$PATH
	fi
	for d in /dev/nvidia*; do [ -e "$d" ] && devs+=(--dev-bind "$d" "$d"); done
	GPU_BWRAP_MSG="$(bwrap --version 2>&1 | head -1) at $(command -v bwrap); sandboxed nvidia-smi -L: $(
		bwrap --unshare-all --die-with-parent --ro-bind /usr /usr --symlink usr/lib /lib \
			--symlink usr/lib64 /lib64 --symlink usr/bin /bin --proc /proc --dev /dev "${devs[@]}" \
			--ro-bind-try /sys /sys nvidia-smi -L 2>&1 | head -2 | tr '\n' ' ')"
}

# gpu_abgate_env CARRY WORK: the environment abgate runs in on the GPU box (ci/gpu-eval.sh,
# ci/gpu-calibrate.sh): the packed libraries (CARRY/lib) and CUDA's on the loader path, jansson's
# headers for ember's source builds (CARRY/deb), and, unless NO_SANDBOX=1, bubblewrap
# (CARRY/deb-bwrap) with a sandbox config in WORK that binds the box's toolchain read-only.
# Sets the array sandbox_args (the abgate options that say so) and SB_CONFIG; logs each step.
#   (call it in the current shell: it exports PATH, LD_LIBRARY_PATH and PKG_CONFIG_PATH)
gpu_abgate_env() {
	local carry=$1 work=$2 ro seen p path_dirs
	[ -d "$carry/lib" ] && export LD_LIBRARY_PATH=$carry/lib:${LD_LIBRARY_PATH:-}
	export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
	# ember's build needs jansson's headers; the GPU image has only the runtime. Sandboxed, the prefix
	# must be outside /tmp (the sandbox's /tmp is its own) and is made visible below.
	[ -n "${NO_SANDBOX:-}" ] || export JANSSON_ROOT=${JANSSON_ROOT:-/opt/abgate-jansson}
	gpu_jansson_setup "$carry/deb"
	log "$GPU_JANSSON_MSG"
	# The PR's build and SUT run under bubblewrap unless NO_SANDBOX=1 (then every report says so).
	sandbox_args=()
	if [ -n "${NO_SANDBOX:-}" ]; then
		sandbox_args=(--no-sandbox)
		log "sandbox: off (NO_SANDBOX=1)"
	else
		gpu_bwrap_setup "$carry/deb-bwrap"
		log "sandbox: $GPU_BWRAP_MSG"
		# The box's toolchain is outside /usr (cmake and python in /opt/torch/.venv, gcc in /opt/gcc):
		# every PATH directory the sandbox would not see is bound read-only (a /opt one by its top
		# directory), with the jansson prefix, and pkg-config's path is passed in (abgate's sandbox
		# config: ro_paths, env_add).
		ro=() seen=" "
		[ -d "${JANSSON_ROOT:-}" ] && ro+=("$JANSSON_ROOT")
		IFS=: read -r -a path_dirs <<<"$PATH"
		for p in "${path_dirs[@]}"; do
			case $p in /usr|/usr/*|/bin|/sbin|/tmp|/tmp/*|"") continue ;; /opt/*) p=/opt/$(echo "${p#/opt/}" | cut -d/ -f1) ;; esac
			[ -d "$p" ] && [ "${seen#* $p }" = "$seen" ] && { ro+=("$p"); seen="$seen$p "; }
		done
		SB_CONFIG=$work/sandbox-config.json
		python3 -c 'import json, sys
json.dump({"sandbox": {"ro_paths": sys.argv[2:], "env_add": ["PKG_CONFIG_PATH"]}}, open(sys.argv[1], "w"), indent=1)' \
			"$SB_CONFIG" "${ro[@]}"
		sandbox_args=(--config "$SB_CONFIG")
		log "sandbox: read-only extras ${ro[*]:-none}; config $SB_CONFIG"
	fi
}

# gpu_archive OUT WORK STATE: one archive back, OUT/results.tgz: all of WORK (results, summary) and
# the SUT and build logs of the state dir (files over 4 MiB left out); replaced atomically, so a run
# cut short still returns what it finished.
gpu_archive() {
	local out=$1 work=$2 state=$3
	cp "$SUMMARY" "$work/summary.log" 2>/dev/null
	find "$state" -name '*.log' -size -4M | sed 's|^/||' >"$work/logs.list"
	tar czf "$out/results.tgz.tmp" -C "$work" . -C / -T "$work/logs.list" 2>/dev/null
	mv -f "$out/results.tgz.tmp" "$out/results.tgz"
}
