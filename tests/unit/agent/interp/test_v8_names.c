/* test_v8_names.c — unit tests of agent/interp/v8_proc.h and v8_names.h on the machine's real
 * `node` ($PF_NODE, else /usr/bin/node): the file's facts (V8's version, the builtins span), and
 * functions named from a live node child's heap, whose SharedFunctionInfo addresses the child
 * prints itself (%DebugPrint, --allow-natives-syntax): a compiled function (its name and start
 * from its ScopeInfo, line through the script), one never called (its name a string), and an
 * address that holds no SharedFunctionInfo (the JSFunction's). Skipped without node. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "v8_names.h"
#include "v8_proc.h"

static const char *g_node = "/usr/bin/node";
static char g_script[64];
static pid_t g_child;
static uint64_t g_fn_hot, g_sfi_hot, g_sfi_lazy;
static struct pf_v8_file g_file;

/* jsHot starts on line 2; jsLazy is never called (V8 compiles it lazily: not yet). */
static const char script_js[] = "'use strict';\n"
				"function jsHot(n) { let s = 0; for (let i = 0; i < n; i++) s += i; "
				"return s; }\n"
				"function jsLazy() { return 1; }\n"
				"for (let k = 0; k < 200; k++) jsHot(10000);\n"
				"%DebugPrint(jsHot);\n"
				"%DebugPrint(jsLazy);\n"
				"console.log('ready');\n"
				"setTimeout(() => {}, 60000);\n";

static uint64_t hex_after(const char *line, const char *key)
{
	const char *p = strstr(line, key);
	return p ? strtoull(p + strlen(key), NULL, 16) : 0;
}

/* Reads the child's output until "ready" (10 s at most): the addresses it printed. */
static int read_addresses(int fd)
{
	char buf[1 << 16];
	size_t len = 0;
	time_t end = time(NULL) + 10;
	while (time(NULL) < end && len < sizeof(buf) - 1) {
		struct pollfd p = {fd, POLLIN, 0};
		if (poll(&p, 1, 500) <= 0)
			continue;
		ssize_t r = read(fd, buf + len, sizeof(buf) - 1 - len);
		if (r <= 0)
			break;
		len += (size_t)r;
		buf[len] = 0;
		if (strstr(buf, "ready\r\n") || strstr(buf, "ready\n"))
			break;
	}
	buf[len] = 0;
	unsigned seen = 0;
	for (char *save = NULL, *l = strtok_r(buf, "\r\n", &save); l;
	     l = strtok_r(NULL, "\r\n", &save)) {
		if (strstr(l, "DebugPrint: ") == l) {
			if (seen++ == 0)
				g_fn_hot = hex_after(l, "DebugPrint: ");
		} else if (strstr(l, "shared_info: ") && strstr(l, "jsHot")) {
			g_sfi_hot = hex_after(l, "shared_info: ");
		} else if (strstr(l, "shared_info: ") && strstr(l, "jsLazy")) {
			g_sfi_lazy = hex_after(l, "shared_info: ");
		}
	}
	if (!g_fn_hot || !g_sfi_hot || !g_sfi_lazy)
		fprintf(stderr, "node printed no addresses (%zu bytes)\n", len);
	return g_fn_hot && g_sfi_hot && g_sfi_lazy ? 0 : -1;
}

static int setup(void **state)
{
	(void)state;
	const char *env = getenv("PF_NODE");
	if (env && *env)
		g_node = env;
	int fd = open(g_node, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		fprintf(stderr, "%s missing: skipped\n", g_node);
		exit(77);
	}
	char why[96];
	int rc = pf_v8_file_read(fd, &g_file, why, sizeof(why));
	close(fd);
	if (rc < 0) {
		fprintf(stderr, "%s: %s\n", g_node, why);
		return -1;
	}
	snprintf(g_script, sizeof(g_script), "/tmp/pf-v8names-%d.js", (int)getpid());
	FILE *f = fopen(g_script, "w");
	if (!f || fputs(script_js, f) < 0 || fclose(f) != 0)
		return -1;
	/* %DebugPrint writes through stdio, which buffers fully into a pipe or a file: the
	 * child's stdout is a terminal (a pty), where stdio flushes every line */
	int master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (master < 0 || grantpt(master) < 0 || unlockpt(master) < 0 || !ptsname(master))
		return -1;
	char slave[128];
	snprintf(slave, sizeof(slave), "%s", ptsname(master));
	g_child = fork();
	if (g_child == 0) {
		int sfd = open(slave, O_RDWR | O_NOCTTY);
		if (sfd < 0)
			_exit(127);
		dup2(sfd, 1);
		execl(g_node, g_node, "--allow-natives-syntax", g_script, (char *)NULL);
		_exit(127);
	}
	rc = read_addresses(master);
	close(master);
	return rc;
}

static int teardown(void **state)
{
	(void)state;
	if (g_child > 0) {
		kill(g_child, SIGKILL);
		waitpid(g_child, NULL, 0);
	}
	unlink(g_script);
	return 0;
}

static void test_file(void **state)
{
	(void)state;
	assert_true(g_file.major >= 8);
	assert_true(g_file.minor >= 0);
	/* Debian's node has .symtab: the builtins span is known and holds the entry trampoline */
	assert_true(g_file.builtins_end > g_file.builtins_start);
	assert_true(g_file.builtins_end - g_file.builtins_start >= (64u << 10));
	assert_true(pf_v8_file_name_ok("/usr/bin/node"));
	assert_true(pf_v8_file_name_ok("/opt/x/lib/libnode.so.108"));
	assert_false(pf_v8_file_name_ok("/usr/bin/nodes"));
	assert_false(pf_v8_file_name_ok("/usr/lib/libnodejs.so"));
}

static void test_names(void **state)
{
	(void)state;
	struct pf_v8_names *n = pf_v8_names_new(&g_file);
	assert_non_null(n);
	struct pf_v8_frame fr;
	assert_int_equal(pf_v8_names_resolve(n, g_child, g_sfi_lazy, &fr), 0);
	assert_string_equal(fr.name, "jsLazy");
	assert_string_equal(fr.file, g_script);
	if (pf_v8_file_scope_info_ok(&g_file)) {
		assert_int_equal(pf_v8_names_resolve(n, g_child, g_sfi_hot, &fr), 0);
		assert_string_equal(fr.name, "jsHot");
		assert_string_equal(fr.file, g_script);
		assert_int_equal(fr.line, 2);
		assert_true(pf_v8_names_bytes(n) > sizeof(void *)); /* the script's line starts */
	} else {
		print_message("V8 %d.%d: ScopeInfo names not read\n", g_file.major, g_file.minor);
	}
	/* a JSFunction is no SharedFunctionInfo; an untagged or page-zero address no heap
	 * object; unmapped memory */
	assert_int_equal(pf_v8_names_resolve(n, g_child, g_fn_hot, &fr), -ENOENT);
	assert_int_equal(pf_v8_names_resolve(n, g_child, g_sfi_hot + 1, &fr), -ENOENT);
	assert_int_equal(pf_v8_names_resolve(n, g_child, 0x801, &fr), -ENOENT);
	int rc = pf_v8_names_resolve(n, g_child, (1ull << 46) + 1, &fr);
	assert_true(rc == -EFAULT || rc == -EIO || rc == -ENOENT);
	pf_v8_names_free(n);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_file),
	    cmocka_unit_test(test_names),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
