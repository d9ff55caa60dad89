"""Two builds of iosleuth on the same inputs, side by side in one run.

    side_by_side.py ROUNDS BASE_BIN THIS_BIN INPUT PREFIX NAME=ARGS...

For each NAME (its iosleuth arguments, split on spaces, the word INPUT
standing for the input), the two binaries
alternate (base, this, this, base, ...) ROUNDS times each; the ratio of
wall time and of CPU time (user + system, all threads) is taken within
each pair (the VM's drift between rounds cancels) and the median and range
printed. Then instructions, the stable measure (this VM has no hardware
counters for `perf stat`): cachegrind's instruction count of one run of
each binary on PREFIX in place of the input (a prefix of it: under
cachegrind a run is ~50x slower), where valgrind is installed.
"""
import resource, shutil, statistics, subprocess, sys, time

rounds, base, this, full, prefix = int(sys.argv[1]), *sys.argv[2:6]
jobs = [a.split("=", 1) for a in sys.argv[6:]]
on = lambda args, path: [path if a == "INPUT" else a for a in args.split()]


def measure(cmd):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    r = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - t
    if r.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({r.returncode})")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def instructions(cmd):
    r = subprocess.run(
        ["valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null"] + cmd,
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    for line in r.stderr.splitlines():
        if "I" in line and "refs:" in line:
            return int(line.split("refs:")[1].strip().replace(",", ""))
    sys.exit(f"cachegrind gave no count for {' '.join(cmd)}: {r.stderr[-400:]}")


med = statistics.median
rng = lambda v: f"{min(v):.2f}-{max(v):.2f}"
print(f"this commit against {base}: ratios base/this (above 1: this is faster), "
      f"medians of {rounds} interleaved pairs (range)")
for name, args in jobs:
    args = on(args, full)
    runs = {"base": [], "this": []}
    for i in range(rounds):
        order = ("base", "this") if i % 2 == 0 else ("this", "base")
        for side in order:
            runs[side].append(measure([base if side == "base" else this] + args))
    wall = [b[0] / t[0] for b, t in zip(runs["base"], runs["this"])]
    cpu = [b[1] / t[1] for b, t in zip(runs["base"], runs["this"])]
    line = (f"  {name:<22} wall {med([r[0] for r in runs['this']]):7.3f} s (base "
            f"{med([r[0] for r in runs['base']]):7.3f}) -> {med(wall):.2f}x ({rng(wall)}); "
            f"CPU {med([r[1] for r in runs['this']]):7.3f} s (base {med([r[1] for r in runs['base']]):7.3f}) "
            f"-> {med(cpu):.2f}x ({rng(cpu)})")
    print(line, flush=True)
if shutil.which("valgrind"):
    for name, args in jobs:
        args = on(args, prefix)
        b, t = instructions([base] + args), instructions([this] + args)
        print(f"  {name:<22} instructions on the prefix: {t / 1e6:.0f} M (base {b / 1e6:.0f} M) -> {b / t:.2f}x")
else:
    print("  instructions: not measured (valgrind is not installed)")
