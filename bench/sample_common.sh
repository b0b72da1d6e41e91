# bench/sample_common.sh — sourced by the benchmarks that run profleet-sample alone
# (bpf_sample_cost.sh, python_sample_cost.sh, java_sample_cost.sh, python_rss.sh) and by
# jit_rss.sh (jdk_setup). Expects $root set; defines functions only.

# jdk_setup: $jdk, the JDK ($PF_JAVA_HOME, else Debian's OpenJDK 17); exits 2 without javac
jdk_setup() {
	jdk=${PF_JAVA_HOME:-/usr/lib/jvm/java-17-openjdk-amd64}
	[ -x "$jdk/bin/javac" ] || { echo "no JDK at $jdk (PF_JAVA_HOME)" >&2; exit 2; }
}

# sample_setup NAME: $sample (PF_SAMPLE, else build/bench-release's profleet-sample, built
# Release when missing: PF_BUILD_DIR), $tmp (a fresh /tmp/pf-NAME.* directory) and $pids
# (killed at exit, the directory removed, kernel.bpf_stats_enabled restored)
sample_setup() {
	local build=${PF_BUILD_DIR:-$root/build/bench-release}
	sample=${PF_SAMPLE:-}
	if [ -z "$sample" ]; then
		sample=$build/agent/profleet-sample
		if [ ! -x "$sample" ]; then
			cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
			cmake --build "$build" -j2 --target profleet-sample >/dev/null
		fi
	fi
	tmp=$(mktemp -d "/tmp/pf-$1.XXXXXX")
	pids=()
	old_stats=$(sysctl -n kernel.bpf_stats_enabled)
	trap sample_cleanup EXIT
}
sample_cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	sysctl -q -w kernel.bpf_stats_enabled="$old_stats" || true
	rm -rf "$tmp"
}

# native_chain DEPTH OUT: a C program (-O2 -fomit-frame-pointer) at OUT whose stacks are DEPTH
# frames deep (main and libc's three frames under it, the rest a chain of calls down to a
# leaf that spins for its argument's seconds): the native process of the same depth that the
# interpreter and JIT benchmarks compare with
native_chain() {
	local calls=$(($1 - 4 > 1 ? $1 - 4 : 1))
	cat > "$2.c" <<EOF
#include <stdlib.h>
#include <time.h>
static volatile unsigned long sink;
__attribute__((noinline)) static void down(int n, time_t end)
{
	if (n > 1) {
		down(n - 1, end);
		sink++; /* not a tail call */
		return;
	}
	while (time(NULL) < end)
		for (int i = 0; i < 100000; i++)
			sink += (unsigned long)i;
}
int main(int argc, char **argv)
{
	down($calls, time(NULL) + atoi(argv[1]));
	return 0;
}
EOF
	cc -O2 -fomit-frame-pointer -o "$2" "$2.c"
}
