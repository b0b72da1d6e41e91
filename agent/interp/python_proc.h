/* python_proc.h — finding CPython in a process and describing its layout.
 *
 * Owns: deciding whether a process runs CPython 3.9–3.13, and where: the executable (a static
 * build such as Debian's /usr/bin/python3.X) or a mapped libpython3.X.so (a shared build),
 * PIE or not, its load bias from /proc/PID/maps; files opened through the process's root
 * (/proc/PID/root), so processes in other mount namespaces (containers) work. It reads, from
 * the file's symbol tables (.dynsym, .symtab when present) and data:
 *   - the version: Py_Version (3.11+) read from the file, else the version string in .rodata
 *     ("3.10.13 (main, ..."), else the soname libpython3.X.so;
 *   - _PyRuntime's address in the process;
 *   - the address ranges of _PyEval_EvalFrameDefault and its .cold part (the hot/cold split
 *     gcc makes; the .cold symbol is only in .symtab, or for a stripped file in its debug file
 *     /usr/lib/debug/.build-id/xx/yyyy.debug when installed) where the native walk meets the
 *     eval loop;
 *   - PyCode_Type's address (a code object's ob_type must equal it);
 *   - the struct offsets (python_offsets.h): from _Py_DebugOffsets at the start of _PyRuntime
 *     (3.13+: cookie "xdebugpy", its version must match the binary's) read from the live
 *     process, else from the agent's table of that minor version.
 *
 * Threads find their PyThreadState through the interpreter's thread list (interpreters.head
 * → threads.head → next, matched on thread_id): the same walk on every version, no TLS
 * lookups (the _Py_tss_tstate TLS variable exists only from 3.12, the TSS key's slot depends
 * on glibc's pthread internals), and it also finds threads that do not hold the GIL.
 *
 * A process whose version or layout is not supported gets -ENOTSUP and a message for the
 * agent's health ("python: 3.7 unsupported"); callers keep its native stacks. Not on the
 * sampling path: reads a few files and a little memory. Thread-safe (no state). */
#ifndef PF_AGENT_PYTHON_PROC_H
#define PF_AGENT_PYTHON_PROC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pf/error.h"
#include "python_offsets.h"

#define PF_PY_MAX_EVAL_RANGES 4 /* _PyEval_EvalFrameDefault, its .cold part, spare */
#define PF_PY_PATH_MAX 512

struct pf_py_range {
	uint64_t start, end; /* [start, end) in the process's address space */
};

/* Where the offsets came from */
#define PF_PY_OFFSETS_TABLE 1 /* the agent's table for this minor version */
#define PF_PY_OFFSETS_DEBUG 2 /* the process's _Py_DebugOffsets */

struct pf_py_process {
	int pid;
	unsigned major, minor, micro;
	char version[16];          /* "3.11.2" */
	char path[PF_PY_PATH_MAX]; /* the file holding the interpreter, as /proc/PID/maps names it
				    * (inside the process's mount namespace) */
	bool shared;               /* in a libpython3.X.so, not the executable */
	uint64_t dev, ino;         /* of that file, as maps gives them */
	uint64_t bias;             /* address in the process minus ELF virtual address */
	uint64_t runtime_addr;     /* _PyRuntime */
	uint64_t code_type_addr;   /* PyCode_Type */
	struct pf_py_range eval[PF_PY_MAX_EVAL_RANGES]; /* eval loop code: [0] is
							 * _PyEval_EvalFrameDefault, then its .cold
							 * part when the file's .symtab names it */
	unsigned n_eval;
	unsigned offsets_source; /* PF_PY_OFFSETS_* */
	struct pf_py_offsets off;
	uint64_t unicode_type_addr; /* PyUnicode_Type, 0 when the file does not name it */
	uint64_t bytes_type_addr;   /* PyBytes_Type, 0 when the file does not name it */
};

/* Detects CPython in process pid. root is the directory its files are opened under
 * ("/proc/PID/root"; NULL means that), maps are read from /proc/PID/maps. Fills *out.
 * 0 when found and supported;
 * -ENOENT: no CPython in the process (the usual answer; err is left unset);
 * -ENOTSUP: CPython of a version or layout this module does not read (err: "python: 3.7
 *   unsupported", "python 3.13.0: _Py_DebugOffsets version 0x30e00f0 does not match");
 * -ESRCH: the process is gone; other negative errno for unreadable files or memory (err says
 *   which). err may be NULL. */
int pf_py_detect(int pid, const char *root, struct pf_py_process *out, struct pf_error *err);

/* The per-file cache of what pf_py_detect read from interpreter candidates (the symbol scan;
 * keyed by device, inode, size and modification time; 128 files): hits, and files read. */
struct pf_py_file_cache_stats {
	uint64_t hits, reads;
};
void pf_py_file_cache_stats(struct pf_py_file_cache_stats *out);

/* The built-in table of minor version 3.minor, or NULL when there is none (3.9–3.12 have
 * one; 3.13+ take theirs from _Py_DebugOffsets). */
const struct pf_py_offsets *pf_py_offsets_table(unsigned minor);

/* The offsets of a 3.13 interpreter from its _Py_DebugOffsets, the first len bytes of
 * _PyRuntime: checks the cookie "xdebugpy", that its version is major.minor, that the build is
 * not free-threaded, and that every offset lies inside the size the block gives for its
 * struct. 0; -ENOTSUP with err set otherwise. */
int pf_py_offsets_from_debug(const uint8_t *buf, size_t len, unsigned major, unsigned minor,
			     struct pf_py_offsets *out, struct pf_error *err);

/* len bytes of process pid's memory at addr (process_vm_readv). 0; -ESRCH (gone), -EPERM,
 * -EFAULT (unmapped, a short read). */
int pf_py_read_mem(int pid, uint64_t addr, void *buf, size_t len);

/* True when addr lies in one of p's eval ranges. */
bool pf_py_in_eval(const struct pf_py_process *p, uint64_t addr);

#endif
