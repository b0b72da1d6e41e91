/* pprof_codec.h — a closed window (pf/profile.h) to a gzip'd pprof `perftools.profiles.Profile`
 * (proto/pprof/perftools/profile.proto) and back; `go tool pprof` reads the output.
 *
 * Owns the pprof conventions of the project. The encoder writes:
 *  - sample_type [{samples, count}, {cpu, nanoseconds}], values [count, count * period],
 *    period_type cpu/nanoseconds, period = 1e9 / frequency_hz, time_nanos / duration_nanos
 *    of the window, default_sample_type "cpu";
 *  - deduplicated mappings (filename, GNU build id, has_functions), functions (name,
 *    system_name, filename) and locations (mapping, address, one line), ids from 1;
 *  - per sample the location ids leaf first and labels pid (num), tid (num) and thread (str,
 *    when the thread name is known);
 * for every process of the window, or only the process `pid`. The bytes are gzip'd (pprof's
 * usual on-disk and HTTP form).
 *
 * The decoder reads untrusted bytes (gzip'd or not; decompression bounded by max_bytes, wire
 * nesting scanned, protobuf-c unpack through an allocator capped at max_bytes, every id and
 * string index checked): one process per distinct pid label (0 when absent), a sample's count
 * is its first value, and each sample gets its own stack (no stack dedup). */
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
