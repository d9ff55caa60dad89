# The iosleuth of an older commit, built beside this one for side-by-side
# benchmarks: `base_build REV` sets base_bin. Built once in a worktree of
# its own (removed after), its binary kept as /var/tmp/iosleuth-base-REV
# for the next run (remove it by hand to rebuild).
base_build() {
  local rev tree
  rev=$(git rev-parse --short=12 "$1^{commit}") || { echo "bench: no commit $1" >&2; exit 2; }
  base_bin=/var/tmp/iosleuth-base-$rev
  [[ -x $base_bin ]] && return 0
  tree=$(mktemp -d /var/tmp/iosleuth-base-tree-XXXX)
  echo "building $rev beside this commit (once; kept as $base_bin) ..." >&2
  git worktree add -q --detach "$tree" "$rev"
  if ! (cd "$tree" && CARGO_TARGET_DIR=$tree/target cargo build --release -q); then
    git worktree remove --force "$tree"; echo "bench: $rev does not build" >&2; exit 2
  fi
  cp "$tree/target/release/iosleuth" "$base_bin"
  git worktree remove --force "$tree"
}
