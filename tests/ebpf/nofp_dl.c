/* nofp_dl.c — the shared library nofp_workload.c opens with dlopen while it is being profiled
 * (built by the test with -O2 -fomit-frame-pointer -fPIC -shared):
 *   dl_chain (workload) -> dl_burn -> dl_inner (burns CPU) */
static volatile unsigned long dl_sink;

__attribute__((noinline)) unsigned long dl_inner(unsigned long x)
{
	for (unsigned long i = 0; i < 300000; i++)
		x = x * 6364136223846793005ul + 1ul + (x >> 9);
	return x;
}

__attribute__((noinline)) unsigned long dl_burn(unsigned long x)
{
	unsigned long r = dl_inner(x ^ 7);
	dl_sink += r;
	return r + 7;
}
