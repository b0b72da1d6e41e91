/* pychild.h — a Python interpreter run as a child of a test: a script given on its command line,
 * its stdout read line by line with a deadline, lines written to its stdin to step it. */
#ifndef PF_TEST_PYCHILD_H
#define PF_TEST_PYCHILD_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

struct pychild {
	pid_t pid;
	int in, out; /* its stdin (we write), its stdout (we read) */
	char buf[65536];
	size_t len;
};

/* Debian's interpreter the tests are written against, and the other builds found on the
 * machine (pyenv's), by minor version; NULL when not there. */
#define PYCHILD_DEBIAN_311 "/usr/bin/python3.11"
const char *pychild_find(unsigned minor);

/* Starts `python -u -c script`. 0 or -errno. */
int pychild_start(struct pychild *c, const char *python, const char *script);
/* Starts argv[0] with argv (a wrapper that ends in a Python). 0 or -errno. */
int pychild_exec(struct pychild *c, char *const argv[]);
/* Reads the next line (without its newline) into line[0, cap) within timeout_ms. 0, -ETIMEDOUT,
 * -EPIPE when the child closed its output. */
int pychild_line(struct pychild *c, char *line, size_t cap, int timeout_ms);
/* Waits until the child's main thread is blocked in read(2) (its /proc/PID/syscall), so a
 * walk of its frames sees the line that reads, not the one before it that is still
 * returning. 0, -ETIMEDOUT. */
int pychild_wait_read(struct pychild *c, int timeout_ms);
/* Writes s and a newline to the child's stdin. */
int pychild_send(struct pychild *c, const char *s);
/* Kills and reaps it. */
void pychild_stop(struct pychild *c);

#endif
