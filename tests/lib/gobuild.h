/* gobuild.h — building a Go program inside a test, with nothing from the network: GOPATH and
 * the build cache in a directory of the test's, no module proxy, GOPATH mode (the standard
 * library only), at most 120 s. Header-only: tests linked against different libraries use it.
 * Go comes from Debian's golang-go (scripts/install-deps.sh); tests skip with a message where
 * pf_go_available() is false. */
#ifndef PF_TEST_GOBUILD_H
#define PF_TEST_GOBUILD_H

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

/* True when a `go` command is on PATH. */
static inline bool pf_go_available(void)
{
	return system("command -v go >/dev/null 2>&1") == 0;
}

/* `go build ARGS -o OUT SRC` run in dir (GOPATH and cache under it), then the shell command
 * after when the build succeeded (NULL: none). The shell's exit status: 0 when all went well. */
static inline int pf_go_build(const char *dir, const char *args, const char *out, const char *src,
			      const char *after)
{
	char cmd[4096];
	snprintf(cmd, sizeof(cmd),
		 "cd %s && env GOPATH=%s/gopath GOCACHE=%s/gocache GOPROXY=off GOFLAGS= "
		 "GO111MODULE=off CGO_ENABLED=1 timeout 120 go build %s -o %s %s%s%s",
		 dir, dir, dir, args, out, src, after ? " && " : "", after ? after : "");
	return system(cmd);
}

#endif
