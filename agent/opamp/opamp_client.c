/* opamp_client.c — see opamp_client.h. The OpAMP rules it keeps are those of the OpAMP
 * specification v0.18.0, written out where they apply. */
#include "opamp/opamp_client.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include <libwebsockets.h>

#include "health.h"
#include "opamp/opamp_session.h"
#include "opamp_codec.h"
#include "pf/backoff.h"
#include "pf/buf.h"
#include "pf/log.h"

#define SYSTEM_CA_BUNDLE "/etc/ssl/certs/ca-certificates.crt"
/* A backstop (and the beat on which health figures go, when their interval is shorter):
 * changes made outside a ServerToAgent wake the loop themselves (health's notify
 * hook, capture statuses, agent_client_wake); the tick catches one that would not. */
#define TICK_US (10000 * LWS_US_PER_MS)
/* News other than a capture's status waits this long after the wake-up that found it, so the
 * changes a window's close makes (sampler, symbolizer, exporter health) go in one message. */
#define NEWS_DELAY_US (250 * LWS_US_PER_MS)
#define PROTOCOL_NAME "profleet-opamp"

struct agent_client {
	struct lws_context *ctx;
	struct agent_session *session;
	struct agent_health *health;
	bool standalone;
	struct agent_url url;
	char *auth; /* "Bearer <token>" */
	char *pending_auth; /* an offered credential being verified by this connection attempt */
	void (*cred_hook)(void *ctx, const char *token);
	void *cred_ctx;
	char *ca_file;
	size_t max_msg;

	struct lws *wsi;
	bool connected;
	bool handshaking; /* a connection attempt that has not yet ended or been established */
	bool got_message;
	bool rx_text;
	bool send_wanted;
	bool heartbeat_due;
	bool close_requested;
	bool stopping;
	bool disconnect_sent;
	bool done;
	bool floor_set;
	uint64_t floor_ms;
	unsigned fail_streak;
	struct pf_backoff backoff;
	struct pf_buf rx;
	struct pf_buf tx;

	lws_sorted_usec_list_t sul_connect;
	lws_sorted_usec_list_t sul_heartbeat;
	lws_sorted_usec_list_t sul_tick;
	bool news_soon; /* news noticed: sul_tick brought forward, then a write asked for */
	lws_sorted_usec_list_t sul_deadline;
	lws_sorted_usec_list_t sul_stop_hook;

	bool (*stop_hook)(void *ctx);
	void *stop_ctx;
	uint64_t stop_max_ms;
	bool stop_hook_started, stop_hook_over;
};

/* ---- URL ---------------------------------------------------------------------------- */

bool agent_url_is_loopback(const struct agent_url *u)
{
	struct in_addr a4;
	struct in6_addr a6;
	if (!strcasecmp(u->host, "localhost"))
		return true;
	if (inet_pton(AF_INET, u->host, &a4) == 1)
		return (ntohl(a4.s_addr) >> 24) == 127;
	if (inet_pton(AF_INET6, u->host, &a6) != 1)
		return false;
	if (IN6_IS_ADDR_LOOPBACK(&a6))
		return true;
	return IN6_IS_ADDR_V4MAPPED(&a6) && a6.s6_addr[12] == 127;
}

int agent_url_parse(const char *url, struct agent_url *out, struct pf_error *err)
{
	static const struct {
		const char *prefix;
		bool tls;
		int port;
	} schemes[] = {
	    {"ws://", false, 80},
	    {"wss://", true, 443},
	    {"http://", false, 80},
	    {"https://", true, 443},
	};
	const char *p = NULL;

	memset(out, 0, sizeof(*out));
	if (!url)
		return pf_error_set(err, -EINVAL, "--server", "missing URL");
	for (size_t i = 0; i < PF_ARRAY_SIZE(schemes); i++) {
		size_t n = strlen(schemes[i].prefix);
		if (strncasecmp(url, schemes[i].prefix, n) == 0) {
			p = url + n;
			out->tls = schemes[i].tls;
			out->port = schemes[i].port;
			break;
		}
	}
	if (!p)
		return pf_error_set(
		    err, -EINVAL, "--server",
		    "URL must start with ws://, wss://, http:// or https://, got '%s'", url);
	size_t alen = strcspn(p, "/?#");
	const char *rest = p + alen;
	if (alen == 0)
		return pf_error_set(err, -EINVAL, "--server", "URL has no host: '%s'", url);
	if (memchr(p, '@', alen))
		return pf_error_set(err, -EINVAL, "--server",
				    "credentials in the URL are not supported; use --token-file");
	const char *host = p, *port = NULL;
	size_t hlen;
	if (*p == '[') {
		const char *rb = memchr(p, ']', alen);
		if (!rb)
			return pf_error_set(err, -EINVAL, "--server", "bad IPv6 literal in '%s'",
					    url);
		host = p + 1;
		hlen = (size_t)(rb - host);
		if (rb + 1 < p + alen) {
			if (rb[1] != ':')
				return pf_error_set(err, -EINVAL, "--server",
						    "bad authority in '%s'", url);
			port = rb + 2;
		}
	} else {
		const char *colon = memchr(p, ':', alen);
		hlen = colon ? (size_t)(colon - p) : alen;
		if (colon)
			port = colon + 1;
	}
	if (hlen == 0 || hlen >= sizeof(out->host))
		return pf_error_set(err, -EINVAL, "--server", "bad host in '%s'", url);
	memcpy(out->host, host, hlen);
	out->host[hlen] = '\0';
	if (port) {
		size_t plen = (size_t)(p + alen - port);
		char buf[8];
		char *end;
		if (plen == 0 || plen >= sizeof(buf))
			return pf_error_set(err, -EINVAL, "--server", "bad port in '%s'", url);
		memcpy(buf, port, plen);
		buf[plen] = '\0';
		long v = strtol(buf, &end, 10);
		if (*end || v < 1 || v > 65535)
			return pf_error_set(err, -EINVAL, "--server", "bad port in '%s'", url);
		out->port = (int)v;
	}
	if (*rest == '#' || *rest == '\0' ||
	    (rest[0] == '/' && (rest[1] == '\0' || rest[1] == '#')))
		snprintf(out->path, sizeof(out->path), "%s", AGENT_OPAMP_PATH);
	else if (*rest == '?')
		snprintf(out->path, sizeof(out->path), "%s%.*s", AGENT_OPAMP_PATH,
			 (int)strcspn(rest, "#"), rest);
	else {
		size_t n = strcspn(rest, "#");
		if (n >= sizeof(out->path))
			return pf_error_set(err, -EINVAL, "--server", "path too long in '%s'", url);
		memcpy(out->path, rest, n);
		out->path[n] = '\0';
	}
	bool v6 = strchr(out->host, ':') != NULL;
	bool default_port = out->port == (out->tls ? 443 : 80);
	if (default_port)
		snprintf(out->host_header, sizeof(out->host_header), v6 ? "[%s]" : "%s", out->host);
	else
		snprintf(out->host_header, sizeof(out->host_header), v6 ? "[%s]:%d" : "%s:%d",
			 out->host, out->port);
	return 0;
}

/* ---- logging --------------------------------------------------------------------------- */

static void lws_log_cb(int level, const char *line)
{
	enum pf_log_level l = PF_LOG_DEBUG;
	if (level & LLL_ERR)
		l = PF_LOG_ERROR;
	else if (level & LLL_WARN)
		l = PF_LOG_WARN;
	if ((int)l <= pf_log_level_current)
		pf_log_emit_raw(l, "lws", line);
}

void agent_lws_logging(int pf_level)
{
	int mask = LLL_ERR | LLL_WARN;
	if (pf_level >= PF_LOG_DEBUG)
		mask |= LLL_NOTICE | LLL_INFO;
	lws_set_log_level(mask, lws_log_cb);
}

/* ---- connection ------------------------------------------------------------------------ */

/* Frees a string that held a secret, zeroed first. NULL is allowed. */
static void free_secret(char *s)
{
	if (s) {
		explicit_bzero(s, strlen(s));
		free(s);
	}
}

static void connect_cb(lws_sorted_usec_list_t *sul);
static void heartbeat_cb(lws_sorted_usec_list_t *sul);

static void schedule_connect(struct agent_client *c, uint64_t delay_ms)
{
	if (c->stopping)
		return;
	if (delay_ms)
		pf_log_info("opamp: reconnecting in %llu ms", (unsigned long long)delay_ms);
	lws_sul_schedule(c->ctx, 0, &c->sul_connect, connect_cb,
			 (lws_usec_t)delay_ms * LWS_US_PER_MS);
}

/* The next delay after a failure: first failure after a good connection is immediate
 * (reconnect at once after an unexpected drop), later ones back off. A server-given floor always applies. */
static uint64_t next_delay(struct agent_client *c)
{
	if (c->floor_set) {
		pf_backoff_retry_after(&c->backoff, c->floor_ms);
		c->floor_set = false;
		c->fail_streak++;
		return pf_backoff_next(&c->backoff);
	}
	if (c->fail_streak++ == 0)
		return 0;
	return pf_backoff_next(&c->backoff);
}

static void schedule_heartbeat(struct agent_client *c)
{
	uint64_t s = agent_session_heartbeat_s(c->session);
	if (!c->connected || s == 0) {
		lws_sul_cancel(&c->sul_heartbeat);
		return;
	}
	lws_sul_schedule(c->ctx, 0, &c->sul_heartbeat, heartbeat_cb,
			 (lws_usec_t)s * LWS_US_PER_SEC);
}

static void heartbeat_cb(lws_sorted_usec_list_t *sul)
{
	struct agent_client *c = lws_container_of(sul, struct agent_client, sul_heartbeat);
	if (!c->connected || !c->wsi)
		return;
	c->heartbeat_due = true;
	lws_callback_on_writable(c->wsi);
}

static void connect_cb(lws_sorted_usec_list_t *sul)
{
	struct agent_client *c = lws_container_of(sul, struct agent_client, sul_connect);
	struct lws_client_connect_info i;

	if (c->stopping || c->wsi)
		return;
	memset(&i, 0, sizeof(i));
	i.context = c->ctx;
	i.address = c->url.host;
	i.port = c->url.port;
	i.path = c->url.path;
	i.host = c->url.host_header;
	i.origin = NULL; /* no Origin, no subprotocol: OpAMP servers expect neither */
	i.protocol = NULL;
	i.local_protocol_name = PROTOCOL_NAME;
	i.ssl_connection = c->url.tls ? LCCSCF_USE_SSL : 0;
	i.pwsi = &c->wsi;
	c->handshaking = true;
	pf_log_debug("opamp: connecting to %s%s://%s%s", "", c->url.tls ? "wss" : "ws",
		     c->url.host_header, c->url.path);
	if (!lws_client_connect_via_info(&i) && c->handshaking) {
		c->handshaking = false;
		c->wsi = NULL;
		schedule_connect(c, next_delay(c));
	}
}

static void on_connection_error(struct agent_client *c, struct lws *wsi, const char *in, size_t len)
{
	char why[256], ra[64];
	unsigned status = wsi ? lws_http_client_http_response(wsi) : 0;
	int64_t ra_ms = -1;

	snprintf(why, sizeof(why), "%.*s", in ? (int)pf_min(len, sizeof(why) - 1) : 0,
		 in ? in : "");
	if (wsi && (status == 503 || status == 429) &&
	    lws_hdr_copy(wsi, ra, (int)sizeof(ra), WSI_TOKEN_HTTP_RETRY_AFTER) > 0)
		ra_ms = pf_retry_after_parse(ra, (int64_t)time(NULL));
	c->handshaking = false;
	c->wsi = NULL;
	c->connected = false;

	if (c->pending_auth) {
		/* Not verified: back to the settings that worked (OpAMP: revert on failure). */
		pf_log_warn("opamp: the offered credential did not connect (%s%s); keeping the "
			    "previous one",
			    status ? "HTTP status " : "", status ? "" : why);
		free_secret(c->pending_auth);
		c->pending_auth = NULL;
		agent_session_drop_offer(c->session);
		if (c->fail_streak == 0)
			c->fail_streak = 1;
		schedule_connect(c, next_delay(c));
		return;
	}
	if (status == 401 || strstr(why, "unauthorized")) {
		pf_log_error("opamp: agent token rejected by %s (HTTP 401); check --token-file",
			     c->url.host_header);
		agent_health_set(c->health, "opamp", false, "unauthorized",
				 "agent token rejected (HTTP 401)");
		c->floor_set = true;
		c->floor_ms = AGENT_UNAUTHORIZED_DELAY_MS;
	} else {
		if (ra_ms >= 0) {
			c->floor_set = true;
			c->floor_ms = (uint64_t)ra_ms;
		}
		char msg[320];
		if (status)
			snprintf(msg, sizeof(msg), "HTTP %u at the upgrade (%s)", status, why);
		else
			snprintf(msg, sizeof(msg), "%s", why[0] ? why : "connection failed");
		pf_log_warn("opamp: cannot connect to %s: %s", c->url.host_header, msg);
		agent_health_set(c->health, "opamp", false, "disconnected", msg);
	}
	/* The first failure is not "after a good connection": always back off here. */
	if (c->fail_streak == 0)
		c->fail_streak = 1;
	schedule_connect(c, next_delay(c));
}

/* An offered credential: the next connection attempt presents it. 0, or -ENOMEM (the offer is
 * dropped). */
static int verify_credential(struct agent_client *c)
{
	const char *tok;
	if (c->standalone || !agent_session_offer(c->session, &tok))
		return -ENOENT;
	size_t n = strlen(tok) + sizeof("Bearer ");
	free_secret(c->pending_auth);
	c->pending_auth = malloc(n);
	if (!c->pending_auth) {
		agent_session_drop_offer(c->session);
		return -ENOMEM;
	}
	snprintf(c->pending_auth, n, "Bearer %s", tok);
	pf_log_info("opamp: reconnecting with the offered credential");
	return 0;
}

/* The offered credential opened a connection: it is verified, persisted and used from now
 * on, for OpAMP and (the hook) for uploads to the controller. */
static void accept_credential(struct agent_client *c)
{
	struct pf_error err = {0};
	if (agent_session_accept_offer(c->session, &err) < 0)
		pf_log_error("opamp: cannot persist the agent's credential (%s): it is used until "
			     "the agent stops",
			     err.msg);
	else
		pf_log_info("opamp: the agent's own credential is verified and persisted");
	free_secret(c->auth);
	c->auth = c->pending_auth;
	c->pending_auth = NULL;
	if (c->cred_hook)
		c->cred_hook(c->cred_ctx, c->auth + 7);
}

void agent_client_set_credential_hook(struct agent_client *c,
				      void (*hook)(void *ctx, const char *token), void *ctx)
{
	c->cred_hook = hook;
	c->cred_ctx = ctx;
}

static void on_established(struct agent_client *c, struct lws *wsi)
{
	c->handshaking = false;
	c->wsi = wsi;
	c->connected = true;
	c->got_message = false;
	c->close_requested = false;
	pf_buf_reset(&c->rx);
	if (c->pending_auth)
		accept_credential(c);
	pf_log_info("opamp: connected to %s", c->url.host_header);
	agent_health_set(c->health, "opamp", true, "connected", NULL);
	agent_session_on_connect(c->session); /* first message on a connection: a full report */
	c->send_wanted = true;
	lws_callback_on_writable(wsi);
}

static void on_closed(struct agent_client *c)
{
	bool was_good = c->got_message;
	c->wsi = NULL;
	c->connected = c->news_soon = false;
	lws_sul_cancel(&c->sul_heartbeat);
	if (c->stopping) {
		c->done = true;
		return;
	}
	pf_log_warn("opamp: connection to %s closed", c->url.host_header);
	agent_health_set(c->health, "opamp", false, "disconnected", "connection closed");
	if (!was_good && c->fail_streak == 0)
		c->fail_streak = 1;
	schedule_connect(c, next_delay(c));
}

static int on_receive(struct agent_client *c, struct lws *wsi, const void *in, size_t len)
{
	const uint8_t *data;
	size_t dlen;
	struct agent_session_action act;
	struct pf_error err = {0};

	if (lws_is_first_fragment(wsi)) {
		pf_buf_reset(&c->rx);
		c->rx_text = !lws_frame_is_binary(wsi);
	}
	if (pf_buf_append(&c->rx, in, len) < 0) {
		/* Over the inbound limit (after reassembly): close with 1009. */
		pf_log_error("opamp: inbound message over %zu bytes; closing", c->max_msg);
		static const char reason[] = "message too large";
		lws_close_reason(wsi, LWS_CLOSE_STATUS_MESSAGE_TOO_LARGE, (unsigned char *)reason,
				 sizeof(reason) - 1);
		pf_buf_reset(&c->rx);
		return -1;
	}
	if (!lws_is_final_fragment(wsi))
		return 0;
	if (c->rx_text) {
		pf_log_warn("opamp: ignoring a text message (OpAMP sends binary only)");
		pf_buf_reset(&c->rx);
		return 0;
	}
	if (pf_opamp_ws_unframe(c->rx.data, c->rx.len, &data, &dlen) < 0) {
		pf_log_warn("opamp: ignoring a message with a bad header");
		pf_buf_reset(&c->rx);
		return 0;
	}
	int r = agent_session_handle(c->session, data, dlen, &act, &err);
	pf_buf_reset(&c->rx);
	if (r < 0) {
		pf_log_warn("opamp: ignoring a malformed ServerToAgent: %s", err.msg);
		return 0;
	}
	if (!c->got_message) {
		c->got_message = true;
		c->fail_streak = 0;
		pf_backoff_reset(&c->backoff);
	}
	if (act.heartbeat_changed)
		schedule_heartbeat(c);
	if (act.credential_offered && verify_credential(c) == 0) {
		c->close_requested = true;
		lws_callback_on_writable(wsi);
		return 0;
	}
	if (act.reconnect) {
		c->floor_set = act.has_retry_after;
		c->floor_ms = act.retry_after_ms;
		c->got_message = false;	 /* back off rather than reconnect at once */
		if (c->fail_streak == 0)
			c->fail_streak = 1;
		c->close_requested = true;
		lws_callback_on_writable(wsi);
		return 0;
	}
	if (act.send) {
		c->send_wanted = true;
		lws_callback_on_writable(wsi);
	}
	return 0;
}

static int on_writeable(struct agent_client *c, struct lws *wsi)
{
	if (c->close_requested) {
		lws_close_reason(wsi,
				 c->stopping ? LWS_CLOSE_STATUS_NORMAL : LWS_CLOSE_STATUS_GOINGAWAY,
				 NULL, 0);
		return -1;
	}
	bool disconnect = c->stopping && !c->disconnect_sent;
	if (!disconnect && !c->send_wanted && !c->heartbeat_due &&
	    !agent_session_has_news(c->session))
		return 0;

	pf_buf_reset(&c->tx);
	int r = pf_buf_reserve(&c->tx, LWS_PRE + 64);
	if (r == 0) {
		memset(c->tx.data, 0, LWS_PRE);
		c->tx.len = LWS_PRE;
		r = pf_opamp_ws_frame_header(&c->tx);
	}
	if (r == 0)
		r = agent_session_build(c->session, disconnect, &c->tx);
	if (r < 0) {
		pf_log_error("opamp: cannot build a message: %s", strerror(-r));
		c->send_wanted = c->heartbeat_due = false;
		return 0;
	}
	size_t n = c->tx.len - LWS_PRE;
	int w = lws_write(wsi, c->tx.data + LWS_PRE, n, LWS_WRITE_BINARY);
	if (w < (int)n) {
		pf_log_warn("opamp: write failed");
		return -1;
	}
	c->send_wanted = c->heartbeat_due = c->news_soon = false;
	schedule_heartbeat(c); /* the interval counts from the last message sent */
	if (disconnect) {
		c->disconnect_sent = true;
		c->close_requested = true;
		lws_callback_on_writable(wsi);
	} else if (agent_session_has_news(c->session)) {
		lws_callback_on_writable(wsi);
	}
	return 0;
}

static int client_cb(struct lws *wsi, enum lws_callback_reasons reason, void *user, void *in,
		     size_t len)
{
	struct lws_context *ctx = wsi ? lws_get_context(wsi) : NULL;
	struct agent_client *c = ctx ? lws_context_user(ctx) : NULL;

	if (!c)
		return 0;
	switch (reason) {
	case LWS_CALLBACK_CLIENT_APPEND_HANDSHAKE_HEADER: {
		unsigned char **p = (unsigned char **)in, *end = (*p) + len;
		const char *auth = c->pending_auth ? c->pending_auth : c->auth;
		if (auth && lws_add_http_header_by_token(wsi, WSI_TOKEN_HTTP_AUTHORIZATION,
							 (const unsigned char *)auth,
							 (int)strlen(auth), p, end))
			return -1;
		return 0;
	}
	case LWS_CALLBACK_CLIENT_CONNECTION_ERROR:
		on_connection_error(c, wsi, in, len);
		return 0;
	case LWS_CALLBACK_CLIENT_ESTABLISHED:
		on_established(c, wsi);
		return 0;
	case LWS_CALLBACK_CLIENT_RECEIVE:
		if (wsi != c->wsi)
			return 0;
		return on_receive(c, wsi, in, len);
	case LWS_CALLBACK_CLIENT_WRITEABLE:
		if (wsi != c->wsi)
			return 0;
		return on_writeable(c, wsi);
	case LWS_CALLBACK_CLIENT_CLOSED:
		if (wsi == c->wsi || !c->wsi)
			on_closed(c);
		return 0;
	case LWS_CALLBACK_WSI_DESTROY:
		/* lws 4.1.6 closes a client whose TLS 1.3 peer refuses it after the handshake
		 * (a client certificate required, or not trusted) while it sends the upgrade,
		 * with neither CONNECTION_ERROR nor CLOSED: without this it never retries. */
		if (c->handshaking && (wsi == c->wsi || !c->wsi)) {
			static const char why[] = "closed by the server during the handshake (a "
						  "client certificate required or refused?)";
			on_connection_error(c, NULL, why, sizeof(why) - 1);
		}
		return 0;
	default:
		return 0;
	}
}

static const struct lws_protocols protocols[] = {
    {PROTOCOL_NAME, client_cb, 0, 0, 0, NULL, 0},
    {NULL, NULL, 0, 0, 0, NULL, 0},
};

/* ---- loop ------------------------------------------------------------------------------ */

/* TICK_US, or the health figures' interval when shorter (agent_session_set_figures_interval) */
static lws_usec_t tick_us(const struct agent_client *c)
{
	uint64_t fig = agent_session_figures_interval(c->session);
	return fig && fig * LWS_US_PER_MS < (uint64_t)TICK_US ? (lws_usec_t)(fig * LWS_US_PER_MS)
							     : TICK_US;
}

static void tick_cb(lws_sorted_usec_list_t *sul)
{
	struct agent_client *c = lws_container_of(sul, struct agent_client, sul_tick);
	/* Changes made outside a ServerToAgent (health of a component, ...) are reported here;
	 * news_soon stays set until the write, so the loop does not bring the tick forward again */
	if (c->connected && c->wsi && agent_session_has_news(c->session))
		lws_callback_on_writable(c->wsi);
	else
		c->news_soon = false;
	lws_sul_schedule(c->ctx, 0, &c->sul_tick, tick_cb, tick_us(c));
}

static void deadline_cb(lws_sorted_usec_list_t *sul)
{
	struct agent_client *c = lws_container_of(sul, struct agent_client, sul_deadline);
	pf_log_warn("opamp: shutdown deadline reached; exiting without a clean close");
	c->done = true;
}

static void stop_hook_deadline_cb(lws_sorted_usec_list_t *sul)
{
	struct agent_client *c = lws_container_of(sul, struct agent_client, sul_stop_hook);
	if (!c->stop_hook_over)
		pf_log_warn("opamp: components did not finish within %llu ms; stopping anyway",
			    (unsigned long long)c->stop_max_ms);
	c->stop_hook_over = true;
}

/* Lets the stop hook finish (bounded) before the goodbye. True when the goodbye may start. */
static bool stop_hook_done(struct agent_client *c)
{
	if (!c->stop_hook || c->stop_hook_over)
		return true;
	if (!c->stop_hook_started) {
		c->stop_hook_started = true;
		lws_sul_schedule(c->ctx, 0, &c->sul_stop_hook, stop_hook_deadline_cb,
				 (lws_usec_t)c->stop_max_ms * LWS_US_PER_MS);
	}
	if (c->stop_hook(c->stop_ctx))
		c->stop_hook_over = true;
	return c->stop_hook_over;
}

void agent_client_set_stop_hook(struct agent_client *c, bool (*done)(void *ctx), void *ctx,
				uint64_t max_ms)
{
	c->stop_hook = done;
	c->stop_ctx = ctx;
	c->stop_max_ms = max_ms;
}

static void begin_stop(struct agent_client *c)
{
	c->stopping = true;
	lws_sul_cancel(&c->sul_connect);
	lws_sul_cancel(&c->sul_heartbeat);
	if (c->connected && c->wsi) {
		pf_log_info("opamp: sending agent_disconnect");
		lws_callback_on_writable(c->wsi);
		lws_sul_schedule(c->ctx, 0, &c->sul_deadline, deadline_cb,
				 (lws_usec_t)AGENT_SHUTDOWN_MS * LWS_US_PER_MS);
	} else {
		c->done = true;
	}
}

struct agent_client *agent_client_new(const struct agent_client_opts *o,
				      struct agent_session *session, struct agent_health *health,
				      struct pf_error *err)
{
	struct lws_context_creation_info info;
	struct agent_client *c = calloc(1, sizeof(*c));

	if (!c) {
		pf_error_set(err, -ENOMEM, "", "out of memory");
		return NULL;
	}
	c->session = session;
	c->health = health;
	c->standalone = !o->server_url;
	c->max_msg = o->max_message_bytes ? o->max_message_bytes : PF_OPAMP_DEFAULT_MAX_MSG;
	pf_buf_init(&c->rx, c->max_msg + 16);
	pf_buf_init(&c->tx, c->max_msg + LWS_PRE + 16);
	pf_backoff_init(&c->backoff, AGENT_BACKOFF_BASE_MS, AGENT_BACKOFF_CAP_MS);
	agent_session_set_max_message(session, c->max_msg);

	if (!c->standalone && agent_url_parse(o->server_url, &c->url, err) < 0)
		goto fail;
	if (o->token) {
		size_t n = strlen(o->token) + sizeof("Bearer ");
		c->auth = malloc(n);
		if (!c->auth) {
			pf_error_set(err, -ENOMEM, "", "out of memory");
			goto fail;
		}
		snprintf(c->auth, n, "Bearer %s", o->token);
		if (!c->url.tls && !c->standalone && !agent_url_is_loopback(&c->url))
			pf_log_warn("opamp: sending the agent token over plain ws:// to %s "
				    "(--allow-insecure)",
				    c->url.host);
	}
	if (o->ca_file) {
		c->ca_file = strdup(o->ca_file);
		if (!c->ca_file) {
			pf_error_set(err, -ENOMEM, "", "out of memory");
			goto fail;
		}
	}

	memset(&info, 0, sizeof(info));
	info.port = CONTEXT_PORT_NO_LISTEN;
	info.protocols = protocols;
	info.user = c;
	info.gid = -1;
	info.uid = -1;
	info.fd_limit_per_thread = 64;
	info.timeout_secs = 15;
	if (!c->standalone && c->url.tls) {
		info.options |= LWS_SERVER_OPTION_DO_SSL_GLOBAL_INIT;
		if (c->ca_file)
			info.client_ssl_ca_filepath = c->ca_file;
		else if (access(SYSTEM_CA_BUNDLE, R_OK) == 0)
			info.client_ssl_ca_filepath = SYSTEM_CA_BUNDLE;
		info.client_ssl_cert_filepath = o->client_cert;
		info.client_ssl_private_key_filepath = o->client_key;
	}
	c->ctx = lws_create_context(&info);
	if (!c->ctx) {
		pf_error_set(err, -EIO, "", "cannot create the libwebsockets context");
		goto fail;
	}
	agent_health_register(health, "opamp");
	if (c->standalone)
		agent_health_set(health, "opamp", true, "standalone (no --server)", NULL);
	else
		agent_health_set(health, "opamp", false, "connecting", NULL);
	return c;
fail:
	agent_client_free(c);
	return NULL;
}

void agent_client_free(struct agent_client *c)
{
	if (!c)
		return;
	if (c->ctx)
		lws_context_destroy(c->ctx);
	pf_buf_release(&c->rx);
	pf_buf_release(&c->tx);
	free_secret(c->auth);
	free_secret(c->pending_auth);
	free(c->ca_file);
	free(c);
}

void agent_client_wake(struct agent_client *c)
{
	if (c && c->ctx)
		lws_cancel_service(c->ctx);
}

int agent_client_run(struct agent_client *c, volatile sig_atomic_t *stop)
{
	lws_sul_schedule(c->ctx, 0, &c->sul_tick, tick_cb, tick_us(c));
	if (!c->standalone)
		schedule_connect(c, 0);
	while (!c->done) {
		if (*stop && !c->stopping && stop_hook_done(c))
			begin_stop(c);
		if (c->done)
			break;
		if (lws_service(c->ctx, 0) < 0)
			break;
		/* woken by another thread (lws_cancel_service) with something to report: a
		 * capture's status goes now, other news (a component's health) shortly, with
		 * whatever else changes meanwhile */
		if (!c->connected || !c->wsi)
			continue;
		if (agent_session_has_capture_news(c->session)) {
			lws_callback_on_writable(c->wsi);
		} else if (!c->news_soon && agent_session_has_news(c->session)) {
			c->news_soon = true;
			lws_sul_schedule(c->ctx, 0, &c->sul_tick, tick_cb, NEWS_DELAY_US);
		}
	}
	lws_sul_cancel(&c->sul_tick);
	lws_sul_cancel(&c->sul_deadline);
	lws_sul_cancel(&c->sul_stop_hook);
	lws_sul_cancel(&c->sul_connect);
	lws_sul_cancel(&c->sul_heartbeat);
	return 0;
}
