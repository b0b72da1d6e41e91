/* profcheck.h — a conformance checker for OTLP profiles (v1.11.0, profiles v1development), for
 * tests. It decodes an ExportProfilesServiceRequest with protobuf-c (independently of
 * proto/codec/otlp_profiles_decode.c) and checks every rule of the OpenTelemetry profiling SIG's
 * conformance checker (the rule ids below), plus our duplicate and orphan checks. Each violation is one message that starts with its rule
 * id, "rule: detail", e.g. "string0: string_table[0] is \"x\", must be empty".
 *
 * Rule ids:
 *   structure        no ResourceProfiles / ScopeProfiles / Profile where one is required
 *   dictionary       dictionary missing
 *   table_empty      a dictionary table is empty
 *   zero_entry       index 0 of mapping/location/function/link/stack is not the empty message
 *   string0          string_table[0] != ""
 *   attribute0       attribute_table[0] has a key, unit or value
 *   index            an index (stack, link, mapping, function, *_strindex, location, attribute)
 *                    out of range
 *   negative         line, column or start_line < 0
 *   mapping_range    memory_start >= memory_limit (unless both are 0)
 *   link_ids         a link after index 0 without a 16-byte trace_id and 8-byte span_id
 *   dup_key          one record's attribute_indices repeat a key
 *   timestamp_range  a sample timestamp outside [time_unix_nano, time_unix_nano+duration_nano)
 *   shape            values/timestamps of different length, values-only with != 1 value,
 *                    neither, or samples of one profile of different shapes
 *   dup_string       the same string twice in string_table       (-check-dupes)
 *   dup_mapping      two equal mappings in mapping_table         (-check-dupes)
 *   orphan           a dictionary entry after index 0 that nothing references (-check-orphans)
 */
#ifndef PF_TESTS_PROFCHECK_H
#define PF_TESTS_PROFCHECK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct profcheck_result {
	size_t n;
	char **msgs; /* n violations, "rule: detail" */
};

/* Checks the bytes. Returns the number of violations (>= 0; result filled) or -EBADMSG when
 * the bytes do not decode as an ExportProfilesServiceRequest, -ENOMEM. */
int profcheck_run(const uint8_t *data, size_t len, struct profcheck_result *res);
/* Whether a violation of rule `rule` was reported. */
bool profcheck_has(const struct profcheck_result *res, const char *rule);
/* Prints every violation to stderr (test diagnostics). */
void profcheck_print(const struct profcheck_result *res);
void profcheck_release(struct profcheck_result *res);

#endif
