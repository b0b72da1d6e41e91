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

pf_api_route_fn pf_api_configs_list;
pf_api_route_fn pf_api_config_get;
pf_api_route_fn pf_api_config_put;
pf_api_route_fn pf_api_config_versions;
/* POST /api/v1/configs/{name}: only {name}:validate (405 otherwise). */
pf_api_route_fn pf_api_config_post;
/* POST /api/v1/configs/{name}/validate. */
pf_api_route_fn pf_api_config_validate;

pf_api_route_fn pf_api_assignments_list;
pf_api_route_fn pf_api_assignment_get;
pf_api_route_fn pf_api_assignment_put;
pf_api_route_fn pf_api_assignment_delete;

#endif
