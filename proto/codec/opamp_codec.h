/* opamp_codec.h — OpAMP v1 (opamp.proto.v1) messages as plain C values, their wire form, and
 * the WebSocket framing. This module (with the rest of proto/codec/) is the only code that
 * touches protobuf-c generated names; the controller and the agent work on
 * the structs below.
 *
 * Decoding untrusted bytes: pf_a2s_decode()/pf_s2a_decode() unpack through a counting
 * allocator with a byte cap (never trust a size from the wire), reject anything malformed with -EBADMSG and
 * a reason in `err`, and return one heap object whose strings and arrays all live in the same
 * allocation arena: free it with pf_a2s_free()/pf_s2a_free().
 *
 * Encoding: pf_a2s_encode()/pf_s2a_encode() append the protobuf bytes (no framing) to `out`.
 * Strings/arrays in a struct being encoded are borrowed, never freed by the encoder.
 *
 * AnyValue attributes are carried as strings: string values as is, bool as "true"/"false",
 * int and double in decimal, bytes in hex, arrays and kvlists as compact JSON. Encoding always
 * writes string_value.
 *
 * Framing (opamp spec "WebSocket Message Format"): every WS binary message is a varint header
 * (must be 0) followed by the protobuf data; empty data is valid.
 *
 * Decoding details (additions to the contract above, all compatible with it):
 *  - the byte cap counts both protobuf-c's unpack allocations and the final arena;
 *  - nesting deeper than PF_OPAMP_MAX_WIRE_DEPTH messages is rejected with -EBADMSG before
 *    protobuf-c sees the bytes (its unpacker recurses without a limit), and a health tree
 *    deeper than PF_OPAMP_MAX_HEALTH_DEPTH levels (the root is level 1) with -EBADMSG;
 *  - every decoded string is non-NULL ("" when absent); every bytes field (config bodies,
 *    hashes, custom data) is followed by a NUL byte that its length does not count, so a
 *    YAML body can be used as a C string; arrays with a zero count are NULL;
 *  - instance_uid_len is the received length; at most PF_OPAMP_UID_LEN bytes are copied
 *    (the receiver decides what to do with a bad length). A new_instance_uid that is not 16
 *    bytes is malformed (-EBADMSG);
 *  - fields the structs do not carry (package statuses, available components, connection
 *    settings requests/status, health attributes, commands...) are ignored.
 *
 * Encoding details: NULL strings are sent as ""; instance_uid_len must be 0 (omitted) or
 * <= PF_OPAMP_UID_LEN, and a health tree at most PF_OPAMP_MAX_HEALTH_DEPTH deep, else
 * -EINVAL. A retry_after without has_error still sends an error_response (type UNKNOWN)
 * carrying the retry info, as the spec has no other place for it. */
#ifndef PF_OPAMP_CODEC_H
#define PF_OPAMP_CODEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pf/buf.h"
#include "pf/error.h"

#define PF_OPAMP_UID_LEN 16
#define PF_OPAMP_DEFAULT_MAX_MSG ((size_t)64 << 20) /* spec default inbound limit */
/* Levels of ComponentHealth accepted, the root included. */
#define PF_OPAMP_MAX_HEALTH_DEPTH 8
/* Nested messages accepted on the wire, the top-level message being depth 1. */
#define PF_OPAMP_MAX_WIRE_DEPTH 32

/* AgentCapabilities */
enum {
	PF_AGENT_CAP_REPORTS_STATUS = 0x1,
	PF_AGENT_CAP_ACCEPTS_REMOTE_CONFIG = 0x2,
	PF_AGENT_CAP_REPORTS_EFFECTIVE_CONFIG = 0x4,
	PF_AGENT_CAP_ACCEPTS_PACKAGES = 0x8,
	PF_AGENT_CAP_REPORTS_PACKAGE_STATUSES = 0x10,
	PF_AGENT_CAP_REPORTS_OWN_TRACES = 0x20,
	PF_AGENT_CAP_REPORTS_OWN_METRICS = 0x40,
	PF_AGENT_CAP_REPORTS_OWN_LOGS = 0x80,
	PF_AGENT_CAP_ACCEPTS_OPAMP_CONNECTION_SETTINGS = 0x100,
	PF_AGENT_CAP_ACCEPTS_OTHER_CONNECTION_SETTINGS = 0x200,
	PF_AGENT_CAP_ACCEPTS_RESTART_COMMAND = 0x400,
	PF_AGENT_CAP_REPORTS_HEALTH = 0x800,
	PF_AGENT_CAP_REPORTS_REMOTE_CONFIG = 0x1000,
	PF_AGENT_CAP_REPORTS_HEARTBEAT = 0x2000,
	PF_AGENT_CAP_REPORTS_AVAILABLE_COMPONENTS = 0x4000,
	PF_AGENT_CAP_REPORTS_CONNECTION_SETTINGS_STATUS = 0x8000,
	PF_AGENT_CAP_ALL_DEFINED = 0xffff,
};

/* ServerCapabilities */
enum {
	PF_SERVER_CAP_ACCEPTS_STATUS = 0x1,
	PF_SERVER_CAP_OFFERS_REMOTE_CONFIG = 0x2,
	PF_SERVER_CAP_ACCEPTS_EFFECTIVE_CONFIG = 0x4,
	PF_SERVER_CAP_OFFERS_PACKAGES = 0x8,
	PF_SERVER_CAP_ACCEPTS_PACKAGES_STATUS = 0x10,
	PF_SERVER_CAP_OFFERS_CONNECTION_SETTINGS = 0x20,
	PF_SERVER_CAP_ACCEPTS_CONNECTION_SETTINGS_REQUEST = 0x40,
};

enum { PF_A2S_FLAG_REQUEST_INSTANCE_UID = 0x1 };
enum { PF_S2A_FLAG_REPORT_FULL_STATE = 0x1, PF_S2A_FLAG_REPORT_AVAILABLE_COMPONENTS = 0x2 };

enum pf_remote_config_status {
	PF_RCS_UNSET = 0,
	PF_RCS_APPLIED = 1,
	PF_RCS_APPLYING = 2,
	PF_RCS_FAILED = 3,
};

enum pf_server_error_type {
	PF_SERR_UNKNOWN = 0,
	PF_SERR_BAD_REQUEST = 1,
	PF_SERR_UNAVAILABLE = 2,
};

struct pf_kv {
	char *key;
	char *value;
};

/* ComponentHealth; children is component_health_map (name -> health). */
struct pf_health_entry;
struct pf_health {
	bool healthy;
	uint64_t start_time_unix_nano;
	char *last_error; /* NULL or "" when none */
	char *status;
	uint64_t status_time_unix_nano;
	size_t n_children;
	struct pf_health_entry *children;
};
struct pf_health_entry {
	char *name;
	struct pf_health health;
};

/* One AgentConfigFile in an AgentConfigMap. */
struct pf_config_file {
	char *name; /* map key, e.g. "profiling.yaml" */
	uint8_t *body;
	size_t body_len;
	char *content_type; /* e.g. "text/yaml" */
};
struct pf_config_map {
	size_t n_files;
	struct pf_config_file *files;
};

struct pf_custom_message {
	char *capability;
	char *type;
	uint8_t *data;
	size_t data_len;
};

/* AgentToServer. has_* tells whether the sub-message was present on the wire (status
 * compression: an absent sub-message means "unchanged"). */
struct pf_a2s {
	uint8_t instance_uid[PF_OPAMP_UID_LEN];
	size_t instance_uid_len; /* as received; a valid message has 16 */
	uint64_t sequence_num;
	uint64_t capabilities;
	uint64_t flags;

	bool has_description;
	size_t n_identifying;
	struct pf_kv *identifying;
	size_t n_non_identifying;
	struct pf_kv *non_identifying;

	bool has_health;
	struct pf_health health;

	bool has_effective_config;
	struct pf_config_map effective_config;

	bool has_remote_config_status;
	uint8_t *rcs_last_hash;
	size_t rcs_last_hash_len;
	enum pf_remote_config_status rcs_status;
	char *rcs_error_message;

	bool has_disconnect;

	bool has_custom_capabilities;
	size_t n_custom_capabilities;
	char **custom_capabilities;

	bool has_custom_message;
	struct pf_custom_message custom_message;
};

/* ServerToAgent. */
struct pf_s2a {
	uint8_t instance_uid[PF_OPAMP_UID_LEN];
	size_t instance_uid_len;
	uint64_t flags;
	uint64_t capabilities;

	bool has_error;
	enum pf_server_error_type error_type;
	char *error_message;
	bool has_retry_after;
	uint64_t retry_after_nanoseconds;

	bool has_remote_config;
	struct pf_config_map remote_config;
	uint8_t *remote_config_hash;
	size_t remote_config_hash_len;

	/* connection_settings.opamp (only sent to agents with AcceptsOpAMPConnectionSettings):
	 * has_heartbeat_interval says it is present, with heartbeat_interval_seconds and its
	 * headers (an Authorization carrying the agent's own credential). connection_settings.hash:
	 * encoding sends connection_settings_hash when its length is not 0, else a hash of the
	 * interval alone; decoding gives the hash received (length 0 when none). */
	bool has_heartbeat_interval;
	uint64_t heartbeat_interval_seconds;
	size_t n_opamp_headers;
	struct pf_kv *opamp_headers;
	uint8_t *connection_settings_hash;
	size_t connection_settings_hash_len;

	bool has_new_instance_uid; /* agent_identification.new_instance_uid */
	uint8_t new_instance_uid[PF_OPAMP_UID_LEN];

	bool has_custom_capabilities;
	size_t n_custom_capabilities;
	char **custom_capabilities;

	bool has_custom_message;
	struct pf_custom_message custom_message;
};

/* Decoders: 0 ok; -EBADMSG malformed (reason in err); -E2BIG over max_bytes of decoded
 * memory; -ENOMEM. *out is set only on success. */
int pf_a2s_decode(const uint8_t *data, size_t len, size_t max_bytes, struct pf_a2s **out,
		  struct pf_error *err);
int pf_s2a_decode(const uint8_t *data, size_t len, size_t max_bytes, struct pf_s2a **out,
		  struct pf_error *err);
void pf_a2s_free(struct pf_a2s *m);
void pf_s2a_free(struct pf_s2a *m);
/* pf_a2s_decode() without an allocation for the message a connected agent sends most (a
 * heartbeat: instance_uid, sequence_num, capabilities, flags and agent_disconnect only): that
 * one is decoded into the caller's *small and *out = small; any other as pf_a2s_decode().
 * Release the result with pf_a2s_release(small, *out), never with pf_a2s_free(). */
int pf_a2s_decode_small(const uint8_t *data, size_t len, size_t max_bytes, struct pf_a2s *small,
			struct pf_a2s **out, struct pf_error *err);
void pf_a2s_release(struct pf_a2s *small, struct pf_a2s *m);

/* Encoders: append protobuf bytes to out. 0, -ENOMEM or -E2BIG (out's cap); -EINVAL for a
 * struct that cannot be encoded (see "Encoding details" above). On failure out is unchanged. */
int pf_a2s_encode(const struct pf_a2s *m, struct pf_buf *out);
int pf_s2a_encode(const struct pf_s2a *m, struct pf_buf *out);

/* WebSocket framing. pf_opamp_ws_unframe() checks the varint header of a received binary
 * message: returns 0 and points *data and *len at the protobuf bytes, or -EBADMSG when the
 * header is not a well-formed varint equal to 0. pf_opamp_ws_frame_header() appends the
 * header (the single byte 0x00). */
int pf_opamp_ws_unframe(const uint8_t *msg, size_t msg_len, const uint8_t **data, size_t *len);
int pf_opamp_ws_frame_header(struct pf_buf *out);

/* Health helpers (for callers that build or compare trees). */
const struct pf_health *pf_health_child(const struct pf_health *h, const char *name);

#endif
