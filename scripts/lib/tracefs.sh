# Sourced by the benchmarks and fixture scripts: tracefs, mounted the way
# `iosleuth record` mounts it when no tracefs is mounted yet, and unmounted
# again by tracefs_release only if this script mounted it.
#
#   tracefs_acquire    sets T to the tracefs mount point (exit 2 if it cannot)
#   tracefs_release    call from the script's cleanup trap
tracefs_mounted_here=
tracefs_acquire() {
  T=$(awk '$3 == "tracefs" {print $2; exit}' /proc/mounts)
  if [[ -z $T ]]; then
    T=/sys/kernel/tracing
    mount -t tracefs nodev "$T" || { echo "$(basename "$0"): cannot mount tracefs at $T" >&2; exit 2; }
    tracefs_mounted_here=1
  fi
}
tracefs_release() {
  if [[ -n $tracefs_mounted_here ]]; then
    # Busy for a moment after the last reader closed: retry, then detach.
    for _ in 1 2 3 4 5; do umount "$T" 2>/dev/null && { tracefs_mounted_here=; return 0; }; sleep 0.2; done
    umount -l "$T" 2>/dev/null || true
    tracefs_mounted_here=
  fi
  return 0
}
