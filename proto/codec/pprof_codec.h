/* pprof_codec.h — a closed window (pf/profile.h) to a gzip'd pprof `perftools.profiles.Profile`
 * (proto/pprof/perftools/profile.proto) and back; `go tool pprof` reads the output.
 *
 * Owns the pprof conventions of the project. The encoder writes:
 *  - for a window without explicit sample types (pf/profile.h): sample_type
 *    [{samples, count}, {cpu, nanoseconds}], values [count, count * period], period_type
 *    cpu/nanoseconds, period = 1e9 / frequency_hz, default_sample_type "cpu";
 *  - for a window with explicit sample types: those sample types, one value per type, the
 *    window's period type, period and default sample type; samples whose values are all zero
 *    are left out;
 *  - time_nanos / duration_nanos of the window;
 *  - deduplicated mappings (filename, GNU build id, has_functions), functions (name,
 *    system_name, filename) and locations (mapping, address, one line), ids from 1;
 *  - per sample the location ids leaf first and labels pid (num), tid (num) — with explicit
 *    sample types only when non-zero — thread (str, when the thread name is known), then the
 *    sample's labels (str, or num with num_unit), the first of a key winning;
 * for every process of the window, or only the process `pid`. The bytes are gzip'd (pprof's
 * usual on-disk and HTTP form).
 *
 * The decoder reads untrusted bytes (gzip'd or not; decompression bounded by max_bytes, wire
 * nesting scanned, protobuf-c unpack through an allocator capped at max_bytes, every id and
 * string index checked) into a window with explicit sample types: all of the profile's sample
 * types, its period type, period and default sample type (frequency_hz from the period when
 * it is in nanoseconds, else 0); one process per distinct pid label (0 when absent); each
 * sample has its values (exactly one per sample type, else -EBADMSG; negative values kept),
 * count = max(first value, 0), labels tid / thread into tid / thread_name and every other
 * label into labels (first of a key wins), and its own stack (no stack dedup). A location
 * with several lines (inlined calls) becomes one frame per line, innermost first. A mapping
 * whose memory_limit is not above its memory_start keeps no range (start = limit = 0). */
#ifndef PF_PPROF_CODEC_H
#define PF_PPROF_CODEC_H

#include <stddef.h>
#include <stdint.h>

#include "pf/buf.h"
#include "pf/error.h"
#include "pf/profile.h"

#define PF_PPROF_ALL_PROCESSES (-1)

/* Appends the gzip'd profile of w (all processes, or only the one with pid `pid`) to out.
 * 0, -ENODATA when nothing matched (no such pid), -EINVAL on an invalid window
 * (frequency_hz 0, an index out of range), -ENOMEM, -E2BIG from out's cap; out is left as it
 * was on failure. */
int pf_pprof_encode(const struct pf_prof_window *w, int64_t pid, struct pf_buf *out,
		    struct pf_error *err);

/* Decodes a pprof profile (gzip'd or plain) into a new window. 0, -EBADMSG on malformed input
 * (also bad ids and string indices), -E2BIG past max_bytes, -ENOMEM. */
int pf_pprof_decode(const uint8_t *data, size_t len, size_t max_bytes,
		    struct pf_prof_window **out, struct pf_error *err);

#endif
