/* v8_proc.h — V8 in a mapped file (a `node` executable or a libnode.so), as the walk and the
 * naming of its frames need it.
 *
 * Owns: deciding whether a file is one whose V8 the agent reads — its name (`node`, `nodejs`,
 * `libnode.so*`), its postmortem constants (v8_meta.h), V8's version (the engine's
 * v8::internal::Version::major_/minor_/build_ in the file's data, when its .symtab names
 * them) — and where V8's embedded builtins lie in it (the span of the `Builtins_*` functions
 * of .symtab: the interpreter's entry trampoline and bytecode handlers run there, so an
 * interpreted JS frame's address is in the file, not in JIT memory). A file without .symtab
 * has no builtins span: its interpreted frames are then not named (JIT frames still are).
 * Thread-safe (no state). */
#ifndef PF_AGENT_V8_PROC_H
#define PF_AGENT_V8_PROC_H

#include <stdbool.h>
#include <stdint.h>

#include "v8_meta.h"

struct pf_v8_file {
	struct pf_v8_meta meta;
	int major, minor, build; /* V8's version; -1 when the file does not say */
	uint64_t builtins_start, builtins_end; /* ELF virtual addresses; 0, 0: unknown */
};

/* True when the file name (a path's last part) is one that may hold V8. */
bool pf_v8_file_name_ok(const char *path);

/* Reads the ELF file open at fd. 0; -ENOTSUP with the reason in why (may be NULL) when its
 * constants are missing or not the layout the walk reads; -EINVAL for no ELF. */
int pf_v8_file_read(int fd, struct pf_v8_file *out, char *why, unsigned why_len);

/* True when the ScopeInfo layout of this V8 version is the one v8_names.c reads (the
 * function's name and position inside a compiled function's ScopeInfo: V8 11). */
bool pf_v8_file_scope_info_ok(const struct pf_v8_file *f);

#endif
