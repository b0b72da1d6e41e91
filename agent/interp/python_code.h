/* python_code.h — naming Python frames: code objects of another process to function, file and
 * line.
 *
 * Owns: a per-process cache (struct pf_py_names) of the code objects the kernel walk recorded,
 * read with process_vm_readv, and the pure decoding under it (separately callable, so tests
 * and fuzzers feed it bytes): a code object's fixed part, str and bytes objects, and the line
 * tables (python_linetable.h).
 *
 * Everything read is another process's memory: reads are bounded (PF_PY_NAME_MAX,
 * PF_PY_FILE_MAX, PF_PY_LINETABLE_MAX), and a code object is taken only when its ob_type is
 * the process's PyCode_Type and its fields are sane (string and bytes objects of the right
 * type, sizes in range, first line > 0). The cache keeps a hash of the fields the name comes
 * from (type, the name/qualname/filename/line-table pointers, first line, code size); every
 * hit re-reads the code object's fixed part (one small read) and compares, so a code object
 * freed and another made at the same address never yields the old name: a mismatch drops the
 * entry and reads the new object.
 *
 * Names: co_qualname (3.11+, "Class.method") or co_name (3.9–3.10); filename co_filename;
 * first line co_firstlineno; the line of the instruction from co_lnotab (3.9), co_linetable
 * (3.10) or the location table (3.11+).
 *
 * Memory: the cache is an LRU bounded by bytes (pf_py_names_new's max_bytes);
 * pf_py_names_bytes() is what it holds, for limits.max_memory_mb accounting.
 *
 * Not for the sampling path (reads another process's memory): the symbolizer thread calls it.
 * Not thread-safe: one owner. */
#ifndef PF_AGENT_PYTHON_CODE_H
#define PF_AGENT_PYTHON_CODE_H

#include <stddef.h>
#include <stdint.h>

#include "python_offsets.h"
#include "python_proc.h"

#define PF_PY_NAME_MAX 255        /* bytes of a qualname kept (UTF-8, cut at a character) */
#define PF_PY_FILE_MAX 1023       /* bytes of a filename kept */
#define PF_PY_LINETABLE_MAX 65536 /* a line table longer than this is not read (line 0) */
#define PF_PY_STR_READ_MAX 4096   /* bytes of a str object read (its characters are cut to
				   * the limits above) */

struct pf_py_frame {
	char name[PF_PY_NAME_MAX + 1];     /* qualname (3.11+) or name, "" never on success */
	char filename[PF_PY_FILE_MAX + 1]; /* co_filename, may be "" */
	uint32_t first_line;               /* co_firstlineno */
	uint32_t line;                     /* line of the instruction, 0 when unknown */
};

struct pf_py_names;

/* A cache for the process p describes (pf_py_detect), holding at most max_bytes (0: 1 MiB).
 * NULL and errno on failure. */
struct pf_py_names *pf_py_names_new(const struct pf_py_process *p, size_t max_bytes);
void pf_py_names_free(struct pf_py_names *names);

/* Names the frame of code object code_addr in process pid at instruction instr:
 *   3.9–3.10: f_lasti as the kernel read it (-1 before the first instruction);
 *   3.11+: the byte offset of prev_instr/instr_ptr from the code's first code unit
 *     (instr - (code_addr + code_code_adaptive)); negative before the first instruction.
 * A u32 the kernel recorded is passed through (int32_t). 0 and *out filled; -ESRCH when the
 * process is gone; -EFAULT when the memory cannot be read; -EINVAL when the address holds no
 * code object (wrong type, insane fields); -ENOMEM. On failure *out is "" / 0. */
int pf_py_names_resolve(struct pf_py_names *names, int pid, uint64_t code_addr, int32_t instr,
			struct pf_py_frame *out);

/* The same, for a frame whose record carries the code object's first line as the kernel read
 * it (the int at code_addr + code_firstlineno, python_offsets.h) at the time of the sample:
 * when the object at code_addr now has another first line it was freed and its address
 * reused after the sample, and -ESTALE is returned instead of the new object's name
 * (counted in stale). */
int pf_py_names_resolve_key(struct pf_py_names *names, int pid, uint64_t code_addr,
			    int32_t instr, uint32_t first_line_key, struct pf_py_frame *out);

/* Bytes the cache holds now (entries, their strings and line tables, the index). */
size_t pf_py_names_bytes(const struct pf_py_names *names);

struct pf_py_names_stats {
	uint64_t entries;   /* code objects cached now */
	uint64_t hits;      /* resolves answered from the cache (after re-validation) */
	uint64_t misses;    /* code objects read */
	uint64_t stale;     /* hits whose object had changed (freed and reused): dropped, re-read */
	uint64_t evicted;   /* entries dropped for the byte bound */
	uint64_t read_failed; /* reads that failed (process gone, unmapped memory) */
	uint64_t invalid;   /* addresses that held no valid code object */
};
void pf_py_names_stats(const struct pf_py_names *names, struct pf_py_names_stats *out);

/* ---- Pure decoding: bytes in, fields out (no memory reads) ---- */

/* The fixed part of a code object as read from memory. */
struct pf_py_code_fields {
	uint64_t type;           /* ob_type */
	uint64_t filename, name, qualname, linetable; /* object addresses (qualname 0 before 3.11) */
	uint64_t code;           /* co_code (3.9–3.10), 0 for 3.11+ */
	int64_t n_units;         /* 3.11+: code units (ob_size); 3.9–3.10: -1 */
	int32_t first_line;      /* co_firstlineno */
	uint64_t hash;           /* of the fields above: a code object's identity in the cache */
};

/* Parses a code object's fixed part buf[0, len) (len >= off->code_basicsize) with the layout
 * off. Checks the type against code_type (0: any) and the fields' sanity. 0, -EINVAL. */
int pf_py_code_parse(const struct pf_py_offsets *off, const uint8_t *buf, size_t len,
		     uint64_t code_type, struct pf_py_code_fields *out);

/* Decodes a str object whose first len bytes are buf (header and characters as far as read)
 * into UTF-8 out[0, cap) (NUL-terminated, cut at a character boundary when it does not fit;
 * lone surrogates and NUL become U+FFFD, other control characters '?'; "" on a refusal).
 * Compact strings only (all code objects' strings are). *need, when not NULL, receives the
 * bytes of the object's header plus characters (to read more when len was short). 0; -EINVAL
 * (not a compact str, length insane); -EAGAIN when len is shorter than *need. */
int pf_py_str_decode(const struct pf_py_offsets *off, const uint8_t *buf, size_t len, char *out,
		     size_t cap, size_t *need);

/* Where a bytes object's data lies, from its first len bytes (at least bytes_sval): *data_off
 * and *data_len. 0; -EINVAL (a negative size, len too short); -E2BIG (over max). */
int pf_py_bytes_header(const struct pf_py_offsets *off, const uint8_t *buf, size_t len,
		       size_t max, size_t *data_off, size_t *data_len);

#endif
