/* opamp_wire.c — interop helper for tests/interop/wire_interop.py: writes our encoding of a
 * fixed AgentToServer/ServerToAgent to a file (for `protoc --decode` against the upstream
 * schema) and decodes a file (made by `protoc --encode`) printing one "path=value" line per
 * field. Bytes are printed in hex, absent sub-messages as "has_x=0".
 *
 *   opamp_wire encode-a2s FILE | encode-s2a FILE | decode-a2s FILE | decode-s2a FILE
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "opamp_codec.h"

static int write_file(const char *path, const struct pf_buf *b)
{
	FILE *f = fopen(path, "wb");
	if (!f)
		return -errno;
	size_t n = b->len ? fwrite(b->data, 1, b->len, f) : 0;
	int r = (n == b->len) ? 0 : -EIO;
	if (fclose(f) != 0 && r == 0)
		r = -EIO;
	return r;
}

static int read_file(const char *path, struct pf_buf *b)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return -errno;
	uint8_t tmp[4096];
	size_t n;
	int r = 0;
	while (r == 0 && (n = fread(tmp, 1, sizeof(tmp), f)) > 0)
		r = pf_buf_append(b, tmp, n);
	if (r == 0 && ferror(f))
		r = -EIO;
	fclose(f);
	return r;
}

static void print_hex(const char *key, const uint8_t *p, size_t n)
{
	printf("%s=", key);
	for (size_t i = 0; i < n; i++)
		printf("%02x", p[i]);
	printf("\n");
}

static void print_health(const char *prefix, const struct pf_health *h)
{
	printf("%s.healthy=%d\n", prefix, h->healthy);
	printf("%s.start_time_unix_nano=%" PRIu64 "\n", prefix, h->start_time_unix_nano);
	printf("%s.last_error=%s\n", prefix, h->last_error);
	printf("%s.status=%s\n", prefix, h->status);
	printf("%s.status_time_unix_nano=%" PRIu64 "\n", prefix, h->status_time_unix_nano);
	printf("%s.n_children=%zu\n", prefix, h->n_children);
	for (size_t i = 0; i < h->n_children; i++) {
		char sub[512];
		snprintf(sub, sizeof(sub), "%s[%s]", prefix, h->children[i].name);
		print_health(sub, &h->children[i].health);
	}
}

static void print_config_map(const char *prefix, const struct pf_config_map *cm)
{
	printf("%s.n_files=%zu\n", prefix, cm->n_files);
	for (size_t i = 0; i < cm->n_files; i++) {
		char key[512];
		snprintf(key, sizeof(key), "%s[%s].body", prefix, cm->files[i].name);
		print_hex(key, cm->files[i].body, cm->files[i].body_len);
		printf("%s[%s].content_type=%s\n", prefix, cm->files[i].name,
		       cm->files[i].content_type);
	}
}

static void print_custom(size_t n, char **caps, bool has_caps, bool has_msg,
			 const struct pf_custom_message *cm)
{
	printf("has_custom_capabilities=%d\n", has_caps);
	for (size_t i = 0; i < n; i++)
		printf("custom_capabilities[%zu]=%s\n", i, caps[i]);
	printf("has_custom_message=%d\n", has_msg);
	if (has_msg) {
		printf("custom_message.capability=%s\n", cm->capability);
		printf("custom_message.type=%s\n", cm->type);
		print_hex("custom_message.data", cm->data, cm->data_len);
	}
}

static void print_a2s(const struct pf_a2s *m)
{
	print_hex("instance_uid", m->instance_uid, pf_min(m->instance_uid_len, (size_t)16));
	printf("instance_uid_len=%zu\n", m->instance_uid_len);
	printf("sequence_num=%" PRIu64 "\n", m->sequence_num);
	printf("capabilities=%" PRIu64 "\n", m->capabilities);
	printf("flags=%" PRIu64 "\n", m->flags);
	printf("has_description=%d\n", m->has_description);
	for (size_t i = 0; i < m->n_identifying; i++)
		printf("identifying[%s]=%s\n", m->identifying[i].key, m->identifying[i].value);
	for (size_t i = 0; i < m->n_non_identifying; i++)
		printf("non_identifying[%s]=%s\n", m->non_identifying[i].key,
		       m->non_identifying[i].value);
	printf("has_health=%d\n", m->has_health);
	if (m->has_health)
		print_health("health", &m->health);
	printf("has_effective_config=%d\n", m->has_effective_config);
	if (m->has_effective_config)
		print_config_map("effective_config", &m->effective_config);
	printf("has_remote_config_status=%d\n", m->has_remote_config_status);
	if (m->has_remote_config_status) {
		print_hex("rcs.last_hash", m->rcs_last_hash, m->rcs_last_hash_len);
		printf("rcs.status=%d\n", (int)m->rcs_status);
		printf("rcs.error_message=%s\n", m->rcs_error_message);
	}
	printf("has_disconnect=%d\n", m->has_disconnect);
	print_custom(m->n_custom_capabilities, m->custom_capabilities, m->has_custom_capabilities,
		     m->has_custom_message, &m->custom_message);
}

static void print_s2a(const struct pf_s2a *m)
{
	print_hex("instance_uid", m->instance_uid, pf_min(m->instance_uid_len, (size_t)16));
	printf("instance_uid_len=%zu\n", m->instance_uid_len);
	printf("flags=%" PRIu64 "\n", m->flags);
	printf("capabilities=%" PRIu64 "\n", m->capabilities);
	printf("has_error=%d\n", m->has_error);
	if (m->has_error) {
		printf("error.type=%d\n", (int)m->error_type);
		printf("error.message=%s\n", m->error_message);
	}
	printf("has_retry_after=%d\n", m->has_retry_after);
	if (m->has_retry_after)
		printf("retry_after_nanoseconds=%" PRIu64 "\n", m->retry_after_nanoseconds);
	printf("has_remote_config=%d\n", m->has_remote_config);
	if (m->has_remote_config) {
		print_config_map("remote_config", &m->remote_config);
		print_hex("remote_config_hash", m->remote_config_hash, m->remote_config_hash_len);
	}
	printf("has_heartbeat_interval=%d\n", m->has_heartbeat_interval);
	if (m->has_heartbeat_interval)
		printf("heartbeat_interval_seconds=%" PRIu64 "\n", m->heartbeat_interval_seconds);
	printf("has_new_instance_uid=%d\n", m->has_new_instance_uid);
	if (m->has_new_instance_uid)
		print_hex("new_instance_uid", m->new_instance_uid, 16);
	print_custom(m->n_custom_capabilities, m->custom_capabilities, m->has_custom_capabilities,
		     m->has_custom_message, &m->custom_message);
}

/* The fixed messages; wire_interop.py checks protoc's view of exactly these values. */
static struct pf_kv ident[] = {{"service.name", "profleet-agent"},
			       {"service.instance.id", "web-01"}};
static struct pf_kv nonident[] = {{"os.type", "linux"}};
static struct pf_health_entry leaf[] = {
    {"cpu0", {.healthy = false, .last_error = "perf_event_open: EACCES", .status = "failed"}},
};
static struct pf_health_entry kids[] = {
    {"sampler",
     {.healthy = false,
      .status = "degraded",
      .start_time_unix_nano = 5,
      .n_children = 1,
      .children = leaf}},
    {"exporter", {.healthy = true, .status = "ok"}},
};
static uint8_t yaml[] = "profiling:\n  enabled: true\n";
static struct pf_config_file files[] = {
    {"profiling.yaml", yaml, sizeof(yaml) - 1, "text/yaml"},
};
static uint8_t rhash[] = {0xde, 0xad, 0xbe, 0xef};
static char *caps[] = {"io.profleet.capture"};
static uint8_t cdata[] = {0x01, 0x00, 0x02};

static void sample_a2s(struct pf_a2s *m)
{
	memset(m, 0, sizeof(*m));
	for (int i = 0; i < 16; i++)
		m->instance_uid[i] = (uint8_t)(0x10 + i);
	m->instance_uid_len = 16;
	m->sequence_num = 42;
	m->capabilities = PF_AGENT_CAP_REPORTS_STATUS | PF_AGENT_CAP_REPORTS_HEALTH |
			  PF_AGENT_CAP_REPORTS_HEARTBEAT;
	m->flags = PF_A2S_FLAG_REQUEST_INSTANCE_UID;
	m->has_description = true;
	m->n_identifying = 2;
	m->identifying = ident;
	m->n_non_identifying = 1;
	m->non_identifying = nonident;
	m->has_health = true;
	m->health = (struct pf_health){.healthy = true,
				       .start_time_unix_nano = 1700000000000000000ULL,
				       .status = "running",
				       .status_time_unix_nano = 9,
				       .n_children = 2,
				       .children = kids};
	m->has_effective_config = true;
	m->effective_config = (struct pf_config_map){1, files};
	m->has_remote_config_status = true;
	m->rcs_last_hash = rhash;
	m->rcs_last_hash_len = sizeof(rhash);
	m->rcs_status = PF_RCS_APPLIED;
	m->rcs_error_message = "";
	m->has_disconnect = true;
	m->has_custom_capabilities = true;
	m->n_custom_capabilities = 1;
	m->custom_capabilities = caps;
	m->has_custom_message = true;
	m->custom_message =
	    (struct pf_custom_message){"io.profleet.capture", "start", cdata, sizeof(cdata)};
}

static void sample_s2a(struct pf_s2a *m)
{
	memset(m, 0, sizeof(*m));
	for (int i = 0; i < 16; i++) {
		m->instance_uid[i] = (uint8_t)(0x10 + i);
		m->new_instance_uid[i] = (uint8_t)(0x80 + i);
	}
	m->instance_uid_len = 16;
	m->flags = PF_S2A_FLAG_REPORT_FULL_STATE;
	m->capabilities = PF_SERVER_CAP_ACCEPTS_STATUS | PF_SERVER_CAP_OFFERS_REMOTE_CONFIG |
			  PF_SERVER_CAP_ACCEPTS_EFFECTIVE_CONFIG |
			  PF_SERVER_CAP_OFFERS_CONNECTION_SETTINGS;
	m->has_error = true;
	m->error_type = PF_SERR_UNAVAILABLE;
	m->error_message = "try later";
	m->has_retry_after = true;
	m->retry_after_nanoseconds = 15000000000ULL;
	m->has_remote_config = true;
	m->remote_config = (struct pf_config_map){1, files};
	m->remote_config_hash = rhash;
	m->remote_config_hash_len = sizeof(rhash);
	m->has_heartbeat_interval = true;
	m->heartbeat_interval_seconds = 30;
	m->has_new_instance_uid = true;
	m->has_custom_capabilities = true;
	m->n_custom_capabilities = 1;
	m->custom_capabilities = caps;
	m->has_custom_message = true;
	m->custom_message = (struct pf_custom_message){"io.profleet.capture", "done", NULL, 0};
}

int main(int argc, char **argv)
{
	struct pf_buf b;
	struct pf_error err = {0};
	int r;

	if (argc != 3) {
		fprintf(stderr, "usage: %s encode-a2s|encode-s2a|decode-a2s|decode-s2a FILE\n",
			argv[0]);
		return 2;
	}
	pf_buf_init(&b, 0);
	const char *cmd = argv[1];
	if (strcmp(cmd, "encode-a2s") == 0 || strcmp(cmd, "encode-s2a") == 0) {
		if (cmd[7] == 'a') {
			struct pf_a2s m;
			sample_a2s(&m);
			r = pf_a2s_encode(&m, &b);
		} else {
			struct pf_s2a m;
			sample_s2a(&m);
			r = pf_s2a_encode(&m, &b);
		}
		if (r == 0)
			r = write_file(argv[2], &b);
	} else if (strcmp(cmd, "decode-a2s") == 0 || strcmp(cmd, "decode-s2a") == 0) {
		r = read_file(argv[2], &b);
		if (r == 0 && cmd[7] == 'a') {
			struct pf_a2s *m = NULL;
			r = pf_a2s_decode(b.data, b.len, PF_OPAMP_DEFAULT_MAX_MSG, &m, &err);
			if (r == 0)
				print_a2s(m);
			pf_a2s_free(m);
		} else if (r == 0) {
			struct pf_s2a *m = NULL;
			r = pf_s2a_decode(b.data, b.len, PF_OPAMP_DEFAULT_MAX_MSG, &m, &err);
			if (r == 0)
				print_s2a(m);
			pf_s2a_free(m);
		}
	} else {
		fprintf(stderr, "unknown command %s\n", cmd);
		r = -EINVAL;
	}
	pf_buf_release(&b);
	if (r < 0) {
		fprintf(stderr, "%s %s: %s%s%s\n", cmd, argv[2], strerror(-r),
			err.msg[0] ? ": " : "", err.msg);
		return 1;
	}
	return 0;
}
