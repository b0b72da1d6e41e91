/* thread.c — see pf/thread.h. */
#include "pf/thread.h"

void pf_thread_stop(pthread_mutex_t *mu, pthread_cond_t *cv, bool *stop, pthread_t thread)
{
	pthread_mutex_lock(mu);
	*stop = true;
	pthread_cond_broadcast(cv);
	pthread_mutex_unlock(mu);
	pthread_join(thread, NULL);
}
