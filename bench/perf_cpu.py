#!/usr/bin/env python3
"""perf_cpu.py SECONDS OUT — runs `perf record -F 99 -g -a` for SECONDS (data into OUT) and
prints the user+sys CPU time it used, in ns: the baseline the data-plane benchmarks
(agent_overhead.sh, agent_whole.sh) compare the agent with in the same run."""
import resource
import subprocess
import sys

secs, out = sys.argv[1], sys.argv[2]
subprocess.run(["perf", "record", "-F", "99", "-g", "-a", "-q", "-o", out, "--", "sleep", secs],
               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
r = resource.getrusage(resource.RUSAGE_CHILDREN)
print(int((r.ru_utime + r.ru_stime) * 1e9))
