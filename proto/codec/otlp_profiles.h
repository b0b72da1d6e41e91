/* otlp_profiles.h — a closed window (pf/profile.h) to OTLP profiles bytes and back:
 * opentelemetry-proto v1.11.0, `opentelemetry.proto.collector.profiles.v1development.
 * ExportProfilesServiceRequest`.
 *
 * Owns the OTLP conventions of the project. The encoder writes, for one window:
 *  - one ResourceProfiles per process that has samples, its Resource carrying plain
 *    key/string_value attributes (process.pid as int_value, per semantic conventions), plus
 *    host.name from the window when the process has none; one ScopeProfiles (scope
 *    "profleet"); one Profile;
 *  - a ProfilesDictionary shared by all profiles and deduplicated (strings, attributes,
 *    mappings, functions, locations, links and stacks each interned once), with the zero value
 *    at index 0 of every table: string_table[0] = "", attribute_table[0] = {} and an empty
 *    message at index 0 of the mapping, location, function, link and stack tables;
 *  - for a window without explicit sample types (pf/profile.h): one Profile per process,
 *    sample_type samples/count, period_type cpu/nanoseconds, period = 1e9 / frequency_hz;
 *    samples of one shape per profile: timestamps-only when every sample of the process has
 *    per-sample timestamps (n_timestamps == count), else exactly one value (count) each;
 *  - for a window with explicit sample types (pprof sources): one Profile per sample type
 *    that has a non-zero value in the process (OTLP v1.11 has one sample_type per Profile),
 *    in the window's order, all in the process's one ScopeProfiles; the window's period type
 *    and period; values-only samples (the sample's value of that type, zero values left
 *    out); process.pid only when the pid is known (non-zero);
 *  - the process's original_payload (and its format, "pprof" by default) on its first
 *    Profile;
 *  - with explicit sample types and a default_sample_type, the Profile attribute
 *    PF_OTLP_DEFAULT_TYPE_ATTR (string: the type's name) on every Profile, since OTLP v1.11
 *    has no field for it;
 *  - time_unix_nano / duration_nano covering [start, end) of the window, widened if a sample
 *    timestamp falls outside it, so every timestamp lies in [time, time + duration);
 *  - sample attributes thread.id (int; with explicit sample types only when non-zero),
 *    thread.name (string, when known), then the sample's labels (string, or int with the
 *    label's unit as the attribute unit), the first of a key winning; location
 *    attribute profile.frame.type ("native", "kernel", "cpython" or "go"); mapping attribute
 *    process.executable.build_id.gnu (when known); a link per distinct (trace id, span id)
 *    with 16- and 8-byte ids for samples that carry one;
 *  - a random 16-byte profile_id per profile (getrandom).
 * Only entries something references are added (no orphans).
 *
 * The decoder reads untrusted bytes into a new window: wire bytes scanned for nesting depth,
 * protobuf-c unpacked through an allocator capped at max_bytes, every index checked, and the
 * window's own arena also counted against max_bytes. When every Profile is samples/count with
 * period type cpu/nanoseconds (or unset), the window has no explicit sample types and each
 * Profile becomes one process (pid from process.pid, attributes from the resource; non-string
 * values rendered in decimal / true/false; other kinds skipped); a sample's count is values[0]
 * when values are present, else the number of timestamps. Otherwise the window's sample types
 * are the distinct (type, unit) pairs in order of appearance, period type and period come from
 * the first Profile that has one, each ScopeProfiles becomes one process, and its Profiles'
 * samples are merged by identity (stack, link, attributes) into samples with one value per
 * sample type (a Profile's sample weighs the sum of its values, or its number of
 * timestamps), and default_sample_type is the first PF_OTLP_DEFAULT_TYPE_ATTR a Profile
 * carries. Sample attributes other than thread.id / thread.name become labels (int
 * values as numbers with the attribute's unit). The first original_payload of a process's
 * Profiles is kept. A mapping whose memory_limit is not above its memory_start keeps no range
 * (start = limit = 0), and a sample timestamp of 2^64-1 (no window can end after it) is
 * malformed, so every decoded window encodes again. */
#ifndef PF_OTLP_PROFILES_H
#define PF_OTLP_PROFILES_H

#include <stddef.h>
#include <stdint.h>

#include "pf/buf.h"
#include "pf/error.h"
#include "pf/profile.h"

#define PF_OTLP_SCOPE_NAME "profleet"
/* Profile attribute naming the sample type to show by default (pprof's default_sample_type). */
#define PF_OTLP_DEFAULT_TYPE_ATTR "profleet.default_sample_type"
/* Nesting of AnyValue inside attributes is legal but unbounded on the wire: the decoder
 * refuses messages nested deeper than this (ExportProfilesServiceRequest itself needs 7). */
#define PF_OTLP_MAX_WIRE_DEPTH 32
/* Entries of each table of a request's ProfilesDictionary (strings, mappings, locations,
 * functions, links, attributes, stacks), counted on the wire before anything is decoded: a
 * table costs far more decoded than on the wire (an empty string: 2 bytes sent, ~40 kept). */
#define PF_OTLP_MAX_TABLE_ENTRIES (1 << 18)

/* Encodes w and appends the bytes to out. profile_id (may be NULL) receives the id of the
 * first profile, which names the export (file exporter). Processes without samples are left
 * out. 0, -ENODATA when no process has samples (nothing to export), -EINVAL on an invalid
 * window (frequency_hz 0, an index out of range, end before start; err says which), -ENOMEM,
 * -E2BIG from out's cap; out is left as it was on failure. */
int pf_otlp_profiles_encode(const struct pf_prof_window *w, struct pf_buf *out,
			    uint8_t profile_id[16], struct pf_error *err);

/* Decodes an ExportProfilesServiceRequest into a new window (*out, free with
 * pf_prof_window_free). 0, -EBADMSG on malformed bytes or indices out of range, -ELOOP on
 * nesting past PF_OTLP_MAX_WIRE_DEPTH, -E2BIG past max_bytes or past
 * PF_OTLP_MAX_TABLE_ENTRIES in a dictionary table, -ENOMEM. */
int pf_otlp_profiles_decode(const uint8_t *data, size_t len, size_t max_bytes,
			    struct pf_prof_window **out, struct pf_error *err);

#endif
