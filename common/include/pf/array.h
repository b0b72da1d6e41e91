/* pf/array.h — growing a heap array that the caller owns (pointer + capacity in elements).
 *
 * pf_array_grow() makes room for at least `need` elements: the capacity doubles from `first`
 * (or from what it is) until it holds `need`, and the array is reallocated once. Sizes that do
 * not fit in size_t are refused, not wrapped. On failure nothing changes: the array and its
 * capacity are the caller's as before, so the caller's error path frees what it held.
 * PF_ARRAY_GROW(arr, cap, need, first) is the call for an `arr` of any element type and a
 * `size_t cap`.
 *
 * pf_array_grow_fill() is for tables indexed directly (an id's slot): it grows to the larger of
 * `need` and twice the capacity, and sets every byte of the new elements to `fill`.
 *
 * pf_array_index_reserve() keeps an open-addressed index over such an array: slot[j] is
 * i + 1 for element i (0: empty), probed linearly from hash & (n_slot - 1), n_slot a power of
 * two at least twice the elements. The caller looks up and inserts itself. */
#ifndef PF_ARRAY_H
#define PF_ARRAY_H

#include <stddef.h>

/* *arrp is the array (any object pointer type, read and written as a pointer), *cap its
 * capacity in elements of `elem` bytes. 0, or -ENOMEM (out of memory or size overflow). */
int pf_array_grow(void *arrp, size_t *cap, size_t need, size_t elem, size_t first);

/* The same, growing to max(need, 2 * *cap) elements whose new bytes are all `fill`. */
int pf_array_grow_fill(void *arrp, size_t *cap, size_t need, size_t elem, int fill);

/* Room in the index (*slot, *n_slot) for element n (the n before it indexed): when
 * (n + 1) * 2 > *n_slot it is rebuilt at twice the size (first: the first size, a power of
 * two) from hash(ctx, i) of elements 0 .. n - 1. 0, or -ENOMEM with the index unchanged. */
int pf_array_index_reserve(size_t **slot, size_t *n_slot, size_t n, size_t first,
			   size_t (*hash)(const void *ctx, size_t i), const void *ctx);

#define PF_ARRAY_GROW(arr, cap, need, first) pf_array_grow(&(arr), &(cap), (need), sizeof(*(arr)), (first))

#endif
