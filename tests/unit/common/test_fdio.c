/* test_fdio.c — pf/fdio.h: a write larger than a pipe's buffer arrives whole while a reader
 * drains it, an empty write is 0, and a bad descriptor is -EBADF. */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "pf/fdio.h"

enum { BIG = 1 << 20 }; /* well over a pipe's 64 KiB: write(2) returns short */

struct drain {
	int fd;
	uint8_t *got;
	size_t n;
};

static void *drain_main(void *arg)
{
	struct drain *d = arg;
	ssize_t r;
	while (d->n < BIG && (r = read(d->fd, d->got + d->n, BIG - d->n)) > 0)
		d->n += (size_t)r;
	return NULL;
}

static void test_whole_buffer_through_pipe(void **state)
{
	(void)state;
	int p[2];
	assert_int_equal(pipe(p), 0);
	uint8_t *src = malloc(BIG);
	struct drain d = {.fd = p[0], .got = malloc(BIG)};
	assert_non_null(src);
	assert_non_null(d.got);
	for (size_t i = 0; i < BIG; i++)
		src[i] = (uint8_t)(i * 131 + i / 4099);
	pthread_t t;
	assert_int_equal(pthread_create(&t, NULL, drain_main, &d), 0);
	assert_int_equal(pf_write_all(p[1], src, BIG), 0);
	close(p[1]);
	pthread_join(t, NULL);
	assert_int_equal(d.n, BIG);
	assert_memory_equal(d.got, src, BIG);
	close(p[0]);
	free(src);
	free(d.got);
}

static void test_empty_and_bad_fd(void **state)
{
	(void)state;
	int p[2];
	assert_int_equal(pipe(p), 0);
	assert_int_equal(pf_write_all(p[1], "x", 0), 0);
	close(p[0]);
	close(p[1]);
	assert_int_equal(pf_write_all(p[1], "abc", 3), -EBADF);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_whole_buffer_through_pipe),
	    cmocka_unit_test(test_empty_and_bad_fd),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
