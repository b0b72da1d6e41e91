/* demangle.c — see demangle.h. */
#include "symbolize/demangle.h"

#include <errno.h>
#include <libiberty/demangle.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define DEFAULT_SLOTS 16384
#define WAYS 4 /* set-associative: names whose hashes collide do not evict each other */
#define DEFAULT_MAX_BYTES ((size_t)4 << 20)
#define MAX_NAME_LEN 4096 /* longer mangled names are demangled but not cached */

struct dm_ent {
	uint64_t hash;   /* 0 = empty */
	char *mangled;
	char *readable;  /* NULL: the demangler refused the name */
};

struct pf_demangler {
	struct dm_ent *ents;
	size_t mask;
	size_t max_bytes;
	char *uncached; /* result of the last lookup that was not cached */
	unsigned victim;
	struct pf_demangler_stats st;
};

bool pf_demangle_is_mangled(const char *name)
{
	return name && name[0] == '_' && (name[1] == 'Z' || name[1] == 'R') && name[2];
}

char *pf_demangle_dup(const char *name)
{
	if (!pf_demangle_is_mangled(name))
		return NULL;
	return cplus_demangle(name, DMGL_PARAMS | DMGL_ANSI);
}

struct pf_demangler *pf_demangler_new(size_t slots, size_t max_bytes)
{
	size_t n = 1;
	if (!slots)
		slots = DEFAULT_SLOTS;
	while (n < slots && n < ((size_t)1 << 24))
		n <<= 1;
	if (n < WAYS)
		n = WAYS;
	struct pf_demangler *d = calloc(1, sizeof(*d));
	if (!d)
		return NULL;
	d->ents = calloc(n, sizeof(*d->ents));
	if (!d->ents) {
		free(d);
		errno = ENOMEM;
		return NULL;
	}
	d->mask = n - 1;
	d->max_bytes = max_bytes ? max_bytes : DEFAULT_MAX_BYTES;
	return d;
}

static void ent_clear(struct pf_demangler *d, struct dm_ent *e)
{
	if (!e->hash)
		return;
	size_t len = strlen(e->mangled) + 1 + (e->readable ? strlen(e->readable) + 1 : 0);
	d->st.bytes -= len < d->st.bytes ? len : d->st.bytes;
	free(e->mangled);
	free(e->readable);
	*e = (struct dm_ent){0};
}

static void clear_all(struct pf_demangler *d)
{
	for (size_t i = 0; i <= d->mask; i++)
		ent_clear(d, &d->ents[i]);
	d->st.bytes = 0;
}

void pf_demangler_free(struct pf_demangler *d)
{
	if (!d)
		return;
	clear_all(d);
	free(d->ents);
	free(d->uncached);
	free(d);
}

static uint64_t name_hash(const char *s, size_t *len)
{
	uint64_t h = 1469598103934665603ull;
	size_t i = 0;
	for (; s[i]; i++)
		h = (h ^ (uint8_t)s[i]) * 1099511628211ull;
	*len = i;
	return h ? h : 1;
}

const char *pf_demangle(struct pf_demangler *d, const char *name)
{
	if (!pf_demangle_is_mangled(name))
		return NULL;
	d->st.lookups++;
	size_t len;
	uint64_t h = name_hash(name, &len);
	struct dm_ent *set = &d->ents[(h & d->mask) & ~(size_t)(WAYS - 1)];
	struct dm_ent *e = NULL;
	for (size_t w = 0; w < WAYS; w++) {
		if (set[w].hash == h && !strcmp(set[w].mangled, name)) {
			d->st.hits++;
			return set[w].readable;
		}
		if (!e && !set[w].hash)
			e = &set[w];
	}
	if (!e) /* the set is full: replace in turn */
		e = &set[d->victim++ % WAYS];
	struct timespec t0, t1;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t0);
	char *r = cplus_demangle(name, DMGL_PARAMS | DMGL_ANSI);
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t1);
	d->st.cpu_ns += (uint64_t)((t1.tv_sec - t0.tv_sec) * 1000000000ll + (t1.tv_nsec - t0.tv_nsec));
	if (r)
		d->st.demangled++;
	else
		d->st.failed++;
	size_t need = len + 1 + (r ? strlen(r) + 1 : 0);
	char *m = len <= MAX_NAME_LEN ? strdup(name) : NULL;
	if (!m) { /* too long to cache, or no memory: hand it out uncached */
		free(d->uncached);
		d->uncached = r;
		return r;
	}
	ent_clear(d, e);
	if (d->st.bytes + need > d->max_bytes) {
		clear_all(d);
		d->st.resets++;
	}
	*e = (struct dm_ent){h, m, r};
	d->st.bytes += need;
	return r;
}

void pf_demangler_stats(const struct pf_demangler *d, struct pf_demangler_stats *out)
{
	*out = d->st;
}
