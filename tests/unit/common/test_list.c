/* test_list.c — pf/list.h: pushes at both ends, unlinking the first, a middle and the last
 * node with and without a tail pointer, the list walked both ways after each step; appends
 * to a queue. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "pf/list.h"

struct node {
	int v;
	struct node *prev, *next;
};

struct list {
	struct node *head, *tail;
};

/* The values from head to tail into out, checking every back link (and the tail). */
static size_t walk(const struct list *l, int *out)
{
	size_t n = 0;
	const struct node *last = NULL;
	for (const struct node *k = l->head; k; k = k->next) {
		assert_ptr_equal(k->prev, last);
		out[n++] = k->v;
		last = k;
	}
	assert_ptr_equal(l->tail, last);
	return n;
}

static void expect(const struct list *l, const int *want, size_t n)
{
	int got[8];
	assert_int_equal(walk(l, got), n);
	if (n)
		assert_memory_equal(got, want, n * sizeof(int));
}

static void test_with_tail(void **state)
{
	(void)state;
	struct node a = {.v = 1}, b = {.v = 2}, c = {.v = 3}, d = {.v = 4};
	struct list l = {0};
	PF_DLIST_PUSH_BACK_T(l.head, l.tail, &b, prev, next);
	PF_DLIST_PUSH_FRONT_T(l.head, l.tail, &a, prev, next);
	PF_DLIST_PUSH_BACK_T(l.head, l.tail, &c, prev, next);
	PF_DLIST_PUSH_BACK_T(l.head, l.tail, &d, prev, next);
	expect(&l, (const int[]){1, 2, 3, 4}, 4);
	PF_DLIST_UNLINK_T(l.head, l.tail, &b, prev, next); /* middle */
	assert_null(b.prev);
	assert_null(b.next);
	expect(&l, (const int[]){1, 3, 4}, 3);
	PF_DLIST_UNLINK_T(l.head, l.tail, &d, prev, next); /* last */
	expect(&l, (const int[]){1, 3}, 2);
	PF_DLIST_UNLINK_T(l.head, l.tail, &a, prev, next); /* first */
	expect(&l, (const int[]){3}, 1);
	PF_DLIST_UNLINK_T(l.head, l.tail, &c, prev, next); /* only */
	assert_null(l.head);
	assert_null(l.tail);
	PF_DLIST_PUSH_FRONT_T(l.head, l.tail, &d, prev, next);
	expect(&l, (const int[]){4}, 1);
}

static void test_head_only(void **state)
{
	(void)state;
	struct node a = {.v = 1}, b = {.v = 2}, c = {.v = 3};
	struct node *head = NULL;
	PF_DLIST_PUSH_FRONT(head, &c, prev, next);
	PF_DLIST_PUSH_FRONT(head, &b, prev, next);
	PF_DLIST_PUSH_FRONT(head, &a, prev, next);
	assert_ptr_equal(head, &a);
	assert_ptr_equal(a.next, &b);
	assert_ptr_equal(b.next, &c);
	assert_ptr_equal(c.prev, &b);
	PF_DLIST_UNLINK(head, &b, prev, next);
	assert_ptr_equal(a.next, &c);
	assert_ptr_equal(c.prev, &a);
	PF_DLIST_UNLINK(head, &a, prev, next);
	assert_ptr_equal(head, &c);
	assert_null(c.prev);
	PF_DLIST_UNLINK(head, &c, prev, next);
	assert_null(head);
}

static void test_queue(void **state)
{
	(void)state;
	struct node a = {.v = 1}, b = {.v = 2, .next = &a}, c = {.v = 3};
	struct node *head = NULL, *tail = NULL;
	PF_QUEUE_APPEND(head, tail, &a, next);
	assert_ptr_equal(head, &a);
	assert_ptr_equal(tail, &a);
	PF_QUEUE_APPEND(head, tail, &b, next); /* a stale link is cleared */
	PF_QUEUE_APPEND(head, tail, &c, next);
	assert_ptr_equal(head, &a);
	assert_ptr_equal(a.next, &b);
	assert_ptr_equal(b.next, &c);
	assert_null(c.next);
	assert_ptr_equal(tail, &c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_with_tail),
	    cmocka_unit_test(test_head_only),
	    cmocka_unit_test(test_queue),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
