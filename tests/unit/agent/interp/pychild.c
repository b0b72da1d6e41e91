/* pychild.c — see pychild.h */
#include "pychild.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

const char *pychild_find(unsigned minor)
{
	static char path[128];
	static const char *const pyenv[] = {"3.9.18", "3.10.13", "3.11.7", "3.12.1",
					    "3.13.0", "3.7.16",	 "3.8.18"};
	for (size_t i = 0; i < sizeof(pyenv) / sizeof(pyenv[0]); i++) {
		unsigned m = 0;
		if (sscanf(pyenv[i], "3.%u.", &m) != 1 || m != minor)
			continue;
		snprintf(path, sizeof(path), "/root/.pyenv/versions/%s/bin/python3.%u", pyenv[i],
			 minor);
		if (access(path, X_OK) == 0)
			return path;
	}
	return NULL;
}

int pychild_start(struct pychild *c, const char *python, const char *script)
{
	char *const argv[] = {(char *)python, "-u", "-c", (char *)script, NULL};
	return pychild_exec(c, argv);
}

int pychild_exec(struct pychild *c, char *const argv[])
{
	int in[2], out[2];
	memset(c, 0, sizeof(*c));
	if (pipe(in) < 0)
		return -errno;
	if (pipe(out) < 0) {
		close(in[0]);
		close(in[1]);
		return -errno;
	}
	pid_t pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		dup2(in[0], 0);
		dup2(out[1], 1);
		close(in[0]);
		close(in[1]);
		close(out[0]);
		close(out[1]);
		execv(argv[0], argv);
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	c->pid = pid;
	c->in = in[1];
	c->out = out[0];
	return 0;
}

int pychild_line(struct pychild *c, char *line, size_t cap, int timeout_ms)
{
	for (;;) {
		char *nl = memchr(c->buf, '\n', c->len);
		if (nl) {
			size_t n = (size_t)(nl - c->buf);
			snprintf(line, cap, "%.*s", (int)n, c->buf);
			memmove(c->buf, nl + 1, c->len - n - 1);
			c->len -= n + 1;
			return 0;
		}
		struct pollfd p = {.fd = c->out, .events = POLLIN};
		int r = poll(&p, 1, timeout_ms);
		if (r == 0)
			return -ETIMEDOUT;
		if (r < 0)
			return -errno;
		if (c->len == sizeof(c->buf))
			return -ENOBUFS;
		ssize_t n = read(c->out, c->buf + c->len, sizeof(c->buf) - c->len);
		if (n <= 0)
			return -EPIPE;
		c->len += (size_t)n;
	}
}

int pychild_wait_read(struct pychild *c, int timeout_ms)
{
	char path[64], buf[64];
	snprintf(path, sizeof(path), "/proc/%d/syscall", (int)c->pid);
	for (int waited = 0; waited <= timeout_ms; waited += 5) {
		FILE *f = fopen(path, "r");
		bool in_read = false;
		if (f) {
			in_read = fgets(buf, sizeof(buf), f) && strncmp(buf, "0 ", 2) == 0;
			fclose(f);
		}
		if (in_read)
			return 0;
		usleep(5000);
	}
	return -ETIMEDOUT;
}

int pychild_send(struct pychild *c, const char *s)
{
	char line[256];
	int n = snprintf(line, sizeof(line), "%s\n", s);
	return write(c->in, line, (size_t)n) == n ? 0 : -EIO;
}

void pychild_stop(struct pychild *c)
{
	if (c->pid > 0) {
		kill(c->pid, SIGKILL);
		waitpid(c->pid, NULL, 0);
		close(c->in);
		close(c->out);
		c->pid = 0;
	}
}
