/* python_linetable.h — CPython line tables: instruction offset to source line.
 *
 * Owns: decoding the three formats CPython has used, from bytes a caller copied out of a code
 * object (untrusted: every read is bounds-checked, the walk stops at the table's end):
 *   3.9  co_lnotab: (byte-offset delta u8, line delta s8) pairs;
 *   3.10 co_linetable: (byte-offset delta u8, line delta s8, -128 = no line) pairs, one entry per
 *        range of bytecode;
 *   3.11+ the location table (co_linetable): entries of a first byte 1cccclll (code 0–15,
 *        length-1 in code units) and varint payloads; codes 0–9 short form (same line), 10–12
 *        one-line forms (line delta code-10), 13 no-column (signed varint line delta),
 *        14 long form (signed varint line delta, end line, columns), 15 no location. */
#ifndef PF_AGENT_PYTHON_LINETABLE_H
#define PF_AGENT_PYTHON_LINETABLE_H

#include <stddef.h>
#include <stdint.h>

/* The line of the instruction at byte offset `offset` of the code (code units are 2 bytes)
 * for minor version 3.minor, with first line first_line. *line = 0 when the table gives none
 * (no location, an offset past the table). 0; -EINVAL for a table that is malformed before
 * the offset; -ENOTSUP for a minor version outside 9..13. */
int pf_py_line_for(unsigned minor, const uint8_t *table, size_t len, int32_t first_line,
		   uint32_t offset, uint32_t *line);

#endif
