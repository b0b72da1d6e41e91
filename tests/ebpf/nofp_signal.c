/* nofp_signal.c — the signal frame workload of the unwinding tests, compiled by the test with
 * -O2 -fomit-frame-pointer. Its CPU time goes to a loop and to a SIGPROF handler that
 * interrupts it (setitimer ITIMER_PROF every 2 ms of CPU time, which the kernel's tick makes
 * every 2-4 ms) and burns about 2 ms itself: a third to a half of the samples are taken in
 * the handler:
 *
 *   main -> outer -> spin                                           (the interrupted loop)
 *   main -> outer -> spin -> (__restore_rt) -> on_prof -> sig_burn  (the handler)
 *
 * A walk that stops at the signal frame shows only sig_burn <- on_prof <- __restore_rt.
 * No system call in either loop: the run ends on SIGALRM.
 *
 *   nofp_signal SECONDS   (prints "ready", then "signals N" when done) */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

static volatile sig_atomic_t done;
static volatile unsigned long sink, signals;

__attribute__((noinline)) unsigned long sig_burn(unsigned long x)
{
	for (unsigned long i = 0; i < 400000; i++)
		x = x * 2862933555777941757ul + 3037000493ul + (x >> 11);
	return x;
}

__attribute__((noinline)) void on_prof(int sig)
{
	unsigned long r = sig_burn((unsigned long)sig + signals);
	sink += r;
	signals++;
}

static void on_alarm(int sig)
{
	(void)sig;
	done = 1;
}

__attribute__((noinline)) unsigned long spin(unsigned long x)
{
	while (!done)
		x = x * 6364136223846793005ul + 1442695040888963407ul + (x >> 7);
	return x;
}

__attribute__((noinline)) unsigned long outer(unsigned long x)
{
	unsigned long r = spin(x ^ 1);
	sink += r;
	return r + 1;
}

int main(int argc, char **argv)
{
	unsigned secs = argc > 1 ? (unsigned)strtoul(argv[1], NULL, 10) : 5;
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_prof;
	sa.sa_flags = SA_RESTART;
	sigaction(SIGPROF, &sa, NULL);
	signal(SIGALRM, on_alarm);
	struct itimerval it = {.it_interval = {0, 2000}, .it_value = {0, 2000}};
	setitimer(ITIMER_PROF, &it, NULL);
	alarm(secs);
	printf("ready\n");
	fflush(stdout);
	sink += outer((unsigned long)secs);
	printf("signals %lu\n", (unsigned long)signals);
	return 0;
}
