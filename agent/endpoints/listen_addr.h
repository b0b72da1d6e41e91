/* listen_addr.h — the address syntax of the agent's local listeners (--metrics-listen,
 * profiling.triggers.slow_span.listen) and a bind check that gives the reason lws would only
 * log. */
#ifndef AGENT_LISTEN_ADDR_H
#define AGENT_LISTEN_ADDR_H

#include <stdbool.h>

#include "pf/error.h"

/* --metrics-listen: "HOST:PORT" with HOST an IPv4 literal, "[IPv6 literal]", "localhost"
 * (127.0.0.1), or empty / "*" / "0.0.0.0" / "[::]" for every interface; PORT 0..65535 (0: any
 * free port, agent_metrics_port() tells which). */
struct agent_listen_addr {
	char host[64]; /* literal without brackets; "" = every interface */
	int port;
	bool v6; /* host is an IPv6 literal */
};

/* 0, or -EINVAL with err ("--metrics-listen: ..."). */
int agent_listen_addr_parse(const char *s, struct agent_listen_addr *out, struct pf_error *err);

/* Binds a throw-away socket to l the way lws will (SO_REUSEADDR): lws only logs why its bind
 * failed, this gives the caller the reason. 0 or -errno (-EADDRINUSE, -EADDRNOTAVAIL, ...).
 */
int agent_listen_addr_probe(const struct agent_listen_addr *l);

#endif
