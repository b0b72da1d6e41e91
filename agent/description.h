/* description.h — the agent's OpAMP AgentDescription.
 *
 * identifying_attributes:      service.name=profleet-agent, service.instance.id=<instance_uid>
 * non_identifying_attributes:  host.name, os.type=linux, host.arch (OTel semconv: amd64, arm64,
 *                              ...), service.version (the project version), Kubernetes
 *                              attributes from the environment when set (K8S_NODE_NAME ->
 *                              k8s.node.name, K8S_POD_NAME -> k8s.pod.name, K8S_NAMESPACE or
 *                              K8S_POD_NAMESPACE -> k8s.namespace.name, K8S_POD_UID ->
 *                              k8s.pod.uid, K8S_CLUSTER_NAME -> k8s.cluster.name), then the
 *                              operator labels as plain attributes (a label never replaces one
 *                              of the attributes above).
 * Owns the strings of a built description (value type; release with
 * agent_description_release()). */
#ifndef AGENT_DESCRIPTION_H
#define AGENT_DESCRIPTION_H

#include <stddef.h>
#include <stdint.h>

#include "opamp_codec.h"
#include "pf/profcfg.h"

#define AGENT_SERVICE_NAME "profleet-agent"

struct agent_description {
	size_t n_identifying;
	struct pf_kv *identifying;
	size_t n_non_identifying;
	struct pf_kv *non_identifying;
};

/* 0 or -ENOMEM. */
int agent_description_build(struct agent_description *d, const uint8_t uid[16],
			    const struct pf_kv_str *labels, size_t n_labels);
void agent_description_release(struct agent_description *d);
/* Value of an attribute (identifying first), NULL when absent. */
const char *agent_description_get(const struct agent_description *d, const char *key);

/* The OTel semconv host.arch value for this build ("amd64", "arm64", ...). */
const char *agent_host_arch(void);
/* The project version (CMake PROJECT_VERSION). */
const char *agent_version(void);

#endif
