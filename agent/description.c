/* description.c — see description.h. */
#include "description.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "pf/uuid.h"

#ifndef PF_AGENT_VERSION
#define PF_AGENT_VERSION "0.0.0"
#endif

const char *agent_version(void)
{
	return PF_AGENT_VERSION;
}

const char *agent_host_arch(void)
{
	/* OTel semantic conventions, host.arch well-known values. */
#if defined(__x86_64__)
	return "amd64";
#elif defined(__aarch64__)
	return "arm64";
#elif defined(__i386__)
	return "x86";
#elif defined(__arm__)
	return "arm32";
#elif defined(__powerpc64__)
	return "ppc64";
#elif defined(__s390x__)
	return "s390x";
#else
	return "unknown";
#endif
}

static int kv_add(struct pf_kv *arr, size_t *n, size_t cap, const char *k, const char *v)
{
	if (*n >= cap)
		return -ENOSPC;
	arr[*n].key = strdup(k);
	arr[*n].value = strdup(v);
	if (!arr[*n].key || !arr[*n].value) {
		free(arr[*n].key);
		free(arr[*n].value);
		return -ENOMEM;
	}
	(*n)++;
	return 0;
}

static bool has_key(const struct pf_kv *arr, size_t n, const char *k)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(arr[i].key, k) == 0)
			return true;
	return false;
}

static const struct {
	const char *env, *attr;
} k8s_env[] = {
    {"K8S_NODE_NAME", "k8s.node.name"},	     {"K8S_POD_NAME", "k8s.pod.name"},
    {"K8S_NAMESPACE", "k8s.namespace.name"}, {"K8S_POD_NAMESPACE", "k8s.namespace.name"},
    {"K8S_POD_UID", "k8s.pod.uid"},	     {"K8S_CLUSTER_NAME", "k8s.cluster.name"},
};

int agent_description_build(struct agent_description *d, const uint8_t uid[16],
			    const struct pf_kv_str *labels, size_t n_labels)
{
	char uid_text[PF_UUID_STR_LEN + 1];
	char host[256];
	size_t cap = 8 + PF_ARRAY_SIZE(k8s_env) + n_labels;
	int r;

	memset(d, 0, sizeof(*d));
	d->identifying = calloc(2, sizeof(*d->identifying));
	d->non_identifying = calloc(cap, sizeof(*d->non_identifying));
	if (!d->identifying || !d->non_identifying) {
		agent_description_release(d);
		return -ENOMEM;
	}
	pf_uuid_format(uid, uid_text);
	r = kv_add(d->identifying, &d->n_identifying, 2, "service.name", AGENT_SERVICE_NAME);
	if (r == 0)
		r = kv_add(d->identifying, &d->n_identifying, 2, "service.instance.id", uid_text);

	if (gethostname(host, sizeof(host)) < 0)
		host[0] = '\0';
	host[sizeof(host) - 1] = '\0';
	struct pf_kv *ni = d->non_identifying;
	size_t *nn = &d->n_non_identifying;
	if (r == 0 && host[0])
		r = kv_add(ni, nn, cap, "host.name", host);
	if (r == 0)
		r = kv_add(ni, nn, cap, "os.type", "linux");
	if (r == 0)
		r = kv_add(ni, nn, cap, "host.arch", agent_host_arch());
	if (r == 0)
		r = kv_add(ni, nn, cap, "service.version", agent_version());
	for (size_t i = 0; r == 0 && i < PF_ARRAY_SIZE(k8s_env); i++) {
		const char *v = getenv(k8s_env[i].env);
		if (v && *v && !has_key(ni, *nn, k8s_env[i].attr))
			r = kv_add(ni, nn, cap, k8s_env[i].attr, v);
	}
	for (size_t i = 0; r == 0 && i < n_labels; i++) {
		if (has_key(ni, *nn, labels[i].key) ||
		    has_key(d->identifying, d->n_identifying, labels[i].key))
			continue;
		r = kv_add(ni, nn, cap, labels[i].key, labels[i].value);
	}
	if (r < 0)
		agent_description_release(d);
	return r;
}

static void kv_array_free(struct pf_kv *kv, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(kv[i].key);
		free(kv[i].value);
	}
	free(kv);
}

void agent_description_release(struct agent_description *d)
{
	kv_array_free(d->identifying, d->n_identifying);
	kv_array_free(d->non_identifying, d->n_non_identifying);
	memset(d, 0, sizeof(*d));
}

const char *agent_description_get(const struct agent_description *d, const char *key)
{
	for (size_t i = 0; i < d->n_identifying; i++)
		if (strcmp(d->identifying[i].key, key) == 0)
			return d->identifying[i].value;
	for (size_t i = 0; i < d->n_non_identifying; i++)
		if (strcmp(d->non_identifying[i].key, key) == 0)
			return d->non_identifying[i].value;
	return NULL;
}
