# ci/gpu-lib.sh - sourced by the GPU-machine scripts (gpu-kernels.sh, gpu-decode-sweep.sh, gpu-eval.sh):
# their summary log, time-limited steps and model generation, and the jansson setup.
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

# gpu_jansson_setup DEB_DIR: ember's build needs jansson's headers and the GPU image has only the
# runtime. Debian packages carried in DEB_DIR (apt-get download libjansson-dev
# libjansson4, as ci/gpu-pack.sh does) are unpacked into a private prefix that pkg-config and the
# loader are pointed at. Does nothing when jansson is installed or no packages were carried.
#   usage: gpu_jansson_setup DEB_DIR; echo "$GPU_JANSSON_MSG"
# (call it in the current shell, not in $(...): it exports PKG_CONFIG_PATH and LD_LIBRARY_PATH)
gpu_jansson_setup() {
	local deb_dir=$1 root=/tmp/jansson-root d
	GPU_JANSSON_MSG="jansson is installed"
	pkg-config --exists jansson 2>/dev/null && return 0
	GPU_JANSSON_MSG="jansson headers missing and no packages in $deb_dir"
	ls "$deb_dir"/*.deb >/dev/null 2>&1 || return 0
	for d in "$deb_dir"/*.deb; do dpkg -x "$d" "$root"; done
	sed -i "s|^prefix=.*|prefix=$root/usr|" "$root"/usr/lib/x86_64-linux-gnu/pkgconfig/jansson.pc
	export PKG_CONFIG_PATH=$root/usr/lib/x86_64-linux-gnu/pkgconfig:${PKG_CONFIG_PATH:-}
	export LD_LIBRARY_PATH=$root/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
	GPU_JANSSON_MSG="jansson headers from the carried packages in $root"
}
