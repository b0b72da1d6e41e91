/* api_configs.h — agent configs and the assignments that serve them (docs/api.md "Configs"
 * and "Assignments"), routes in api.c's route table. A config is stored as numbered
 * versions (validated with pf_profcfg_parse); an assignment names a config and a selector,
 * and the fleet serves each agent the config of its best-matching assignment.
 *
 *   GET  /api/v1/configs                       latest version of each, and the served one
 *   GET  /api/v1/configs/{name}[?version=]     the YAML (admin) or its hash
 *   PUT  /api/v1/configs/{name}[?dry_run=1|?stage=1]   a new version
 *   POST /api/v1/configs/{name}:validate, /api/v1/configs/{name}/validate   checks only
 *   GET  /api/v1/configs/{name}/versions
 *   GET|PUT|DELETE /api/v1/assignments[/{name}]   PUT and DELETE push to the matched agents */
#ifndef PF_API_CONFIGS_H
#define PF_API_CONFIGS_H

#include "api.h"

void pf_api_configs_list(struct pf_api *api, const struct pf_api_request *req,
			 struct pf_api_response *resp);
void pf_api_config_get(struct pf_api *api, const struct pf_api_request *req,
		       struct pf_api_response *resp);
void pf_api_config_put(struct pf_api *api, const struct pf_api_request *req,
		       struct pf_api_response *resp);
void pf_api_config_versions(struct pf_api *api, const struct pf_api_request *req,
			    struct pf_api_response *resp);
/* POST /api/v1/configs/{name}: only {name}:validate (405 otherwise). */
void pf_api_config_post(struct pf_api *api, const struct pf_api_request *req,
			struct pf_api_response *resp);
/* POST /api/v1/configs/{name}/validate. */
void pf_api_config_validate(struct pf_api *api, const struct pf_api_request *req,
			    struct pf_api_response *resp);

void pf_api_assignments_list(struct pf_api *api, const struct pf_api_request *req,
			     struct pf_api_response *resp);
void pf_api_assignment_get(struct pf_api *api, const struct pf_api_request *req,
			   struct pf_api_response *resp);
void pf_api_assignment_put(struct pf_api *api, const struct pf_api_request *req,
			   struct pf_api_response *resp);
void pf_api_assignment_delete(struct pf_api *api, const struct pf_api_request *req,
			      struct pf_api_response *resp);

#endif
