/* test_error.c — pf/error.h: first error wins, path prefix, truncation, NULL err, code names,
 * a constructor's out of memory (pf_error_oom). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "pf/error.h"

static void test_set_with_path(void **state)
{
	struct pf_error err = {0};

	int r = pf_error_set(&err, -EINVAL, "profiling.sampling.frequency_hz",
			     "must be 1..1000, got %d", 5000);
	assert_int_equal(r, -EINVAL);
	assert_int_equal(err.code, -EINVAL);
	assert_string_equal(err.path, "profiling.sampling.frequency_hz");
	assert_string_equal(err.msg, "profiling.sampling.frequency_hz: must be 1..1000, got 5000");
}

static void test_set_without_path(void **state)
{
	struct pf_error err = {0};

	assert_int_equal(pf_error_set(&err, -ENOENT, NULL, "no agent %s", "x"), -ENOENT);
	assert_string_equal(err.path, "");
	assert_string_equal(err.msg, "no agent x");
	pf_error_clear(&err);
	assert_int_equal(pf_error_set(&err, -ENOENT, "", "empty path"), -ENOENT);
	assert_string_equal(err.msg, "empty path");
}

static void test_first_error_wins(void **state)
{
	struct pf_error err = {0};

	pf_error_set(&err, -EINVAL, "a", "first");
	assert_int_equal(pf_error_set(&err, -ENOMEM, "b", "second"), -ENOMEM);
	assert_int_equal(err.code, -EINVAL);
	assert_string_equal(err.path, "a");
	assert_string_equal(err.msg, "a: first");
	pf_error_clear(&err);
	assert_int_equal(err.code, 0);
	assert_string_equal(err.msg, "");
	pf_error_set(&err, -ENOMEM, "b", "second");
	assert_string_equal(err.msg, "b: second");
}

static void test_null_err_allowed(void **state)
{
	assert_int_equal(pf_error_set(NULL, -EINVAL, "x", "ignored %d", 1), -EINVAL);
	pf_error_clear(NULL);
}

static void test_truncation(void **state)
{
	struct pf_error err = {0};
	char longpath[600], longmsg[1200];

	memset(longpath, 'p', sizeof(longpath) - 1);
	longpath[sizeof(longpath) - 1] = 0;
	memset(longmsg, 'm', sizeof(longmsg) - 1);
	longmsg[sizeof(longmsg) - 1] = 0;
	pf_error_set(&err, -EINVAL, longpath, "%s", longmsg);
	assert_int_equal(strlen(err.path), sizeof(err.path) - 1);
	assert_int_equal(strlen(err.msg), sizeof(err.msg) - 1);
	/* The message holds the (truncated) path, so nothing of the detail fits. */
	assert_int_equal(err.msg[0], 'p');
}

static void test_code_names(void **state)
{
	assert_string_equal(pf_error_code_name(0), "ok");
	assert_string_equal(pf_error_code_name(-EINVAL), "invalid_argument");
	assert_string_equal(pf_error_code_name(-ENOENT), "not_found");
	assert_string_equal(pf_error_code_name(-EEXIST), "already_exists");
	assert_string_equal(pf_error_code_name(-ENOMEM), "out_of_memory");
	assert_string_equal(pf_error_code_name(-E2BIG), "too_large");
	assert_string_equal(pf_error_code_name(-EMSGSIZE), "too_large");
	assert_string_equal(pf_error_code_name(-EACCES), "permission_denied");
	assert_string_equal(pf_error_code_name(-EPERM), "permission_denied");
	assert_string_equal(pf_error_code_name(-EBADMSG), "malformed");
	assert_string_equal(pf_error_code_name(-EPROTO), "malformed");
	assert_string_equal(pf_error_code_name(-EBUSY), "unavailable");
	assert_string_equal(pf_error_code_name(-EAGAIN), "unavailable");
	assert_string_equal(pf_error_code_name(-ETIMEDOUT), "timeout");
	assert_string_equal(pf_error_code_name(-EIO), "internal");
	assert_string_equal(pf_error_code_name(12345), "internal");
}

static void test_oom(void **state)
{
	(void)state;
	struct pf_error err = {0};
	errno = 0;
	assert_null(pf_error_oom(&err));
	assert_int_equal(errno, ENOMEM);
	assert_int_equal(err.code, -ENOMEM);
	assert_string_equal(err.path, "");
	assert_string_equal(err.msg, "out of memory");
	errno = 0;
	assert_null(pf_error_oom(NULL)); /* no detail wanted: errno still set */
	assert_int_equal(errno, ENOMEM);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_set_with_path),
	    cmocka_unit_test(test_set_without_path),
	    cmocka_unit_test(test_first_error_wins),
	    cmocka_unit_test(test_null_err_allowed),
	    cmocka_unit_test(test_truncation),
	    cmocka_unit_test(test_code_names),
	    cmocka_unit_test(test_oom),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
