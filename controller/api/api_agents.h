/* api_agents.h — the fleet as the REST API shows it (docs/api.md "Agents"), viewer routes in
 * api.c's route table. On a store shared by replicas the agents of the other replicas are
 * read from their rows first (pf_api_refresh_fleet).
 *
 *   GET /api/v1/agents?selector=&state=&config_status=&limit=&cursor=   by instance_uid
 *   GET /api/v1/agents/{instance_uid}                                   one agent in full
 *   GET /api/v1/fleet/summary                                           counts by state */
#ifndef PF_API_AGENTS_H
#define PF_API_AGENTS_H

#include "api.h"

pf_api_route_fn pf_api_agents_list;
pf_api_route_fn pf_api_agent_get;
pf_api_route_fn pf_api_fleet_summary;

#endif
