/* pf/thread.h — stopping a worker thread that sleeps on a condition variable.
 *
 * A worker of this shape loops under its mutex, waiting on its condition variable until there
 * is work or its stop flag is set. pf_thread_stop() is its owner's side of the stop: the flag
 * is set under the mutex, every waiter is woken, and the thread is joined. The mutex and the
 * condition variable stay the owner's to destroy. */
#ifndef PF_THREAD_H
#define PF_THREAD_H

#include <pthread.h>
#include <stdbool.h>

void pf_thread_stop(pthread_mutex_t *mu, pthread_cond_t *cv, bool *stop, pthread_t thread);

#endif
