/* pf/list.h — the operations of intrusive linked lists whose owner keeps the head pointer,
 * and the tail pointer when it has one, and names the node's link fields: doubly-linked
 * lists (an LRU, a set of open connections: PF_DLIST_UNLINK(l->head, k, prev, next)) and
 * singly-linked FIFO queues (PF_QUEUE_APPEND). No allocation; the arguments are evaluated
 * more than once, so pass plain lvalues. A node off every doubly-linked list has both links
 * NULL. */
#ifndef PF_LIST_H
#define PF_LIST_H

#include <stddef.h>

/* n first in the list that starts at head. */
#define PF_DLIST_PUSH_FRONT(head, n, PREV, NEXT)                                                   \
	do {                                                                                       \
		(n)->PREV = NULL;                                                                  \
		(n)->NEXT = (head);                                                                \
		if (head)                                                                          \
			(head)->PREV = (n);                                                        \
		(head) = (n);                                                                      \
	} while (0)

/* The same for a list with a tail pointer. */
#define PF_DLIST_PUSH_FRONT_T(head, tail, n, PREV, NEXT)                                           \
	do {                                                                                       \
		PF_DLIST_PUSH_FRONT(head, n, PREV, NEXT);                                          \
		if (!(tail))                                                                       \
			(tail) = (n);                                                              \
	} while (0)

/* n last in a singly-linked FIFO queue with a tail pointer (items leave at head). */
#define PF_QUEUE_APPEND(head, tail, n, NEXT)                                                       \
	do {                                                                                       \
		(n)->NEXT = NULL;                                                                  \
		if (tail)                                                                          \
			(tail)->NEXT = (n);                                                        \
		else                                                                               \
			(head) = (n);                                                              \
		(tail) = (n);                                                                      \
	} while (0)

/* n last in a doubly-linked list with a tail pointer. */
#define PF_DLIST_PUSH_BACK_T(head, tail, n, PREV, NEXT)                                            \
	do {                                                                                       \
		(n)->PREV = (tail);                                                                \
		PF_QUEUE_APPEND(head, tail, n, NEXT);                                              \
	} while (0)

/* n (on the list) out of it; its links become NULL. */
#define PF_DLIST_UNLINK(head, n, PREV, NEXT)                                                       \
	do {                                                                                       \
		if ((n)->PREV)                                                                     \
			(n)->PREV->NEXT = (n)->NEXT;                                               \
		else                                                                               \
			(head) = (n)->NEXT;                                                        \
		if ((n)->NEXT)                                                                     \
			(n)->NEXT->PREV = (n)->PREV;                                               \
		(n)->PREV = (n)->NEXT = NULL;                                                      \
	} while (0)

/* The same for a list with a tail pointer. */
#define PF_DLIST_UNLINK_T(head, tail, n, PREV, NEXT)                                               \
	do {                                                                                       \
		if (!(n)->NEXT)                                                                    \
			(tail) = (n)->PREV;                                                        \
		PF_DLIST_UNLINK(head, n, PREV, NEXT);                                              \
	} while (0)

#endif
