/* python_proc.c — CPython detection: maps, the interpreter's ELF file, version, layout. */
#include "python_proc.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <inttypes.h>
#include <libelf.h>
#include <linux/openat2.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/uio.h>
#include <unistd.h>

#include "elf_syms.h"
#include "pf/compiler.h"

/* ---- Per-version tables ----
 *
 * Each number is the byte offset of a field in the struct CPython's headers of that version
 * define (x86_64 and arm64 LP64 layouts are the same); they were checked against the DWARF of
 * a build of each version (3.9.18, 3.10.13, 3.11.7, 3.12.1) and, for 3.11, against the live
 * memory of Debian 12's /usr/bin/python3.11 (3.11.2) in the unit tests. Field sources:
 *   _PyRuntimeState            Include/internal/pycore_runtime.h
 *   PyInterpreterState (_is)   Include/internal/pycore_interp.h
 *   PyThreadState (_ts), _PyCFrame   Include/cpython/pystate.h
 *   PyFrameObject (_frame)     Include/cpython/frameobject.h (3.9–3.10)
 *   _PyInterpreterFrame        Include/internal/pycore_frame.h (3.11+)
 *   PyCodeObject               Include/cpython/code.h
 *   PyASCIIObject, PyCompactUnicodeObject  Include/cpython/unicodeobject.h
 *   PyBytesObject              Include/cpython/bytesobject.h
 *   PyObject, PyVarObject      Include/object.h: ob_refcnt 0, ob_type 8, ob_size 16 */

/* clang-format off */
/* What every supported version lays out alike: the interpreter and thread lists' next
 * pointers, PyObject/PyVarObject, the head of str and bytes. */
#define PY_COMMON_LAYOUT \
	.interp_next = 0, /* _is.next, first */ \
	.tstate_next = 8, /* _ts.prev 0, next 8 */ \
	.object_type = 8, \
	.varobject_size = 16, \
	.unicode_length = 16, /* PyASCIIObject.length */ \
	.unicode_state = 32, /* PyASCIIObject.state, after hash 24 */ \
	.bytes_sval = 32 /* PyBytesObject.ob_sval, after ob_shash 24 */

/* str with wstr (3.9–3.11). */
#define PY_STR_WSTR_LAYOUT \
	.unicode_ascii_size = 48, /* sizeof(PyASCIIObject): state, wstr */ \
	.unicode_compact_size = 72 /* sizeof(PyCompactUnicodeObject): + utf8_length, utf8, \
		 * wstr_length */

/* 3.9 and 3.10: frames are PyFrameObjects reached from the thread's frame; only where f_lasti
 * sits and what it counts differ. */
#define PY_FRAME_OBJECT_LAYOUT(lasti, unit) \
	.frame_kind = PF_PY_FRAMES_OBJECT, \
	.runtime_interpreters_head = 32, /* after _finalizing, the main thread id and the \
		 * interpreters' mutex (a PyThread_type_lock) */ \
	.interp_threads_head = 8, /* _is.tstate_head */ \
	.tstate_thread_id = 176, /* _ts.thread_id */ \
	.tstate_native_thread_id = PF_PY_NONE, \
	.tstate_frame = 24, /* _ts.frame, after interp 16 */ \
	.cframe_current_frame = PF_PY_NONE, \
	.pyframe_back = 24, /* _frame.f_back after PyObject_VAR_HEAD */ \
	.pyframe_code = 32, /* _frame.f_code */ \
	.pyframe_lasti = (lasti), \
	.lasti_unit = (unit), \
	.iframe_previous = PF_PY_NONE, .iframe_code = PF_PY_NONE, .iframe_instr = PF_PY_NONE, \
	.iframe_owner = PF_PY_NONE, .iframe_is_entry = PF_PY_NONE, .owner_cstack = PF_PY_NONE, \
	.code_basicsize = 176, /* sizeof(PyCodeObject) */ \
	.code_code_adaptive = PF_PY_NONE, \
	.code_code = 48, /* co_code, after six int fields and co_flags */ \
	.code_filename = 104, /* co_filename */ \
	.code_name = 112, /* co_name */ \
	.code_qualname = PF_PY_NONE, \
	.code_linetable = 120, /* co_lnotab (3.9), co_linetable (3.10) */ \
	.code_firstlineno = 40, /* co_firstlineno */ \
	PY_STR_WSTR_LAYOUT, \
	PY_COMMON_LAYOUT

/* 3.11 and 3.12: frames live in _PyInterpreterFrame, reached through the thread's _PyCFrame;
 * the code object carries its instructions (co_code_adaptive) and co_qualname. */
#define PY_INTERP_FRAME_LAYOUT \
	.frame_kind = PF_PY_FRAMES_INTERP, \
	.runtime_interpreters_head = 40, /* _PyRuntimeState.interpreters.head */ \
	.tstate_frame = 56, /* _ts.cframe (_PyCFrame *) */ \
	.pyframe_back = PF_PY_NONE, .pyframe_code = PF_PY_NONE, .pyframe_lasti = PF_PY_NONE, \
	.lasti_unit = 0, \
	.iframe_instr = 56, /* _PyInterpreterFrame.prev_instr */ \
	.code_code = PF_PY_NONE, \
	.code_filename = 112, /* co_filename */ \
	.code_name = 120, /* co_name */ \
	.code_qualname = 128, /* co_qualname */ \
	.code_linetable = 136, /* co_linetable */ \
	PY_COMMON_LAYOUT

static const struct pf_py_offsets table_3_9 = {
	.version_hex = 0x03090000,
	PY_FRAME_OBJECT_LAYOUT(104 /* _frame.f_lasti (bytes) */, PF_PY_LASTI_BYTES),
};

/* 3.10: f_lasti counts code units; co_lnotab became co_linetable at the same place. */
static const struct pf_py_offsets table_3_10 = {
	.version_hex = 0x030a0000,
	PY_FRAME_OBJECT_LAYOUT(96 /* _frame.f_lasti (code units), after f_trace_* moved */,
			       PF_PY_LASTI_UNITS),
};

static const struct pf_py_offsets table_3_11 = {
	.version_hex = 0x030b0000,
	PY_INTERP_FRAME_LAYOUT,
	.interp_threads_head = 16, /* _is.threads.head, after threads.next_unique_id */
	.tstate_thread_id = 152, /* _ts.thread_id */
	.tstate_native_thread_id = 160, /* _ts.native_thread_id */
	.cframe_current_frame = 8, /* _PyCFrame.current_frame, after use_tracing */
	.iframe_previous = 48, /* _PyInterpreterFrame.previous, after f_func,
		 * f_globals, f_builtins, f_locals, f_code, frame_obj */
	.iframe_code = 32, /* _PyInterpreterFrame.f_code */
	.iframe_owner = 69, /* _PyInterpreterFrame.owner (char) */
	.iframe_is_entry = 68, /* _PyInterpreterFrame.is_entry (bool), after stacktop */
	.owner_cstack = PF_PY_NONE, /* no FRAME_OWNED_BY_CSTACK in 3.11 */
	.code_basicsize = 192, /* sizeof(PyCodeObject) with co_code_adaptive[1] */
	.code_code_adaptive = 184, /* co_code_adaptive */
	.code_firstlineno = 72, /* co_firstlineno */
	PY_STR_WSTR_LAYOUT,
};

/* 3.12: the interpreter frame starts with f_code and previous; entry frames became shims
 * owned by the C stack (FRAME_OWNED_BY_CSTACK = 3); str lost wstr. */
static const struct pf_py_offsets table_3_12 = {
	.version_hex = 0x030c0000,
	PY_INTERP_FRAME_LAYOUT,
	.interp_threads_head = 72, /* _is.threads.head, after id, the finalizing fields,
		 * ceval and threads.next_unique_id */
	.tstate_thread_id = 136, /* _ts.thread_id */
	.tstate_native_thread_id = 144, /* _ts.native_thread_id */
	.cframe_current_frame = 0, /* _PyCFrame.current_frame, first */
	.iframe_previous = 8, /* _PyInterpreterFrame.previous */
	.iframe_code = 0, /* _PyInterpreterFrame.f_code */
	.iframe_owner = 70, /* _PyInterpreterFrame.owner, after stacktop,
		 * return_offset */
	.iframe_is_entry = PF_PY_NONE,
	.owner_cstack = 3, /* FRAME_OWNED_BY_CSTACK */
	.code_basicsize = 200,
	.code_code_adaptive = 192,
	.code_firstlineno = 68, /* co_firstlineno, after co_stacksize */
	.unicode_ascii_size = 40, /* sizeof(PyASCIIObject) without wstr */
	.unicode_compact_size = 56, /* + utf8_length, utf8 */
};
#undef PY_INTERP_FRAME_LAYOUT
#undef PY_FRAME_OBJECT_LAYOUT
#undef PY_STR_WSTR_LAYOUT
#undef PY_COMMON_LAYOUT
/* clang-format on */

const struct pf_py_offsets *pf_py_offsets_table(unsigned minor)
{
	switch (minor) {
	case 9:
		return &table_3_9;
	case 10:
		return &table_3_10;
	case 11:
		return &table_3_11;
	case 12:
		return &table_3_12;
	default:
		return NULL;
	}
}

bool pf_py_in_eval(const struct pf_py_process *p, uint64_t addr)
{
	for (unsigned i = 0; i < p->n_eval && i < PF_PY_MAX_EVAL_RANGES; i++)
		if (addr >= p->eval[i].start && addr < p->eval[i].end)
			return true;
	return false;
}

int pf_py_read_mem(int pid, uint64_t addr, void *buf, size_t len)
{
	struct iovec local = {.iov_base = buf, .iov_len = len};
	struct iovec remote = {.iov_base = (void *)(uintptr_t)addr, .iov_len = len};
	ssize_t n = process_vm_readv((pid_t)pid, &local, 1, &remote, 1, 0);
	if (n == (ssize_t)len)
		return 0;
	if (n >= 0)
		return -EFAULT; /* a short read: the range ends in unmapped memory */
	return errno == ESRCH ? -ESRCH : errno == EPERM ? -EPERM : -EFAULT;
}

/* ---- _Py_DebugOffsets (3.13) ----
 *
 * Include/internal/pycore_runtime.h of 3.13: struct _Py_DebugOffsets is _PyRuntime's first
 * field; every member is a uint64_t. The indexes below are its members in declaration order
 * (an index times 8 is the member's offset). The struct grows between minor versions, so only
 * the 3.13 declaration is read, for a version field of 3.13. */
enum {
	DO_VERSION = 1,
	DO_FREE_THREADED = 2,
	DO_RUNTIME = 3,	  /* size, finalizing, interpreters_head */
	DO_INTERP = 6,	  /* size, id, next, threads_head, gc, imports_modules, sysdict, builtins,
			   * ceval_gil, gil_runtime_state, _enabled, _locked, _holder */
	DO_TSTATE = 19,	  /* size, prev, next, interp, current_frame, thread_id, native_thread_id,
			   * datastack_chunk, status */
	DO_IFRAME = 28,	  /* size, previous, executable, instr_ptr, localsplus, owner */
	DO_CODE = 34,	  /* size, filename, name, qualname, linetable, firstlineno, argcount,
			   * localsplusnames, localspluskinds, co_code_adaptive */
	DO_PYOBJECT = 44, /* size, ob_type */
	DO_TYPE = 46,	  /* size, tp_name, tp_repr, tp_flags */
	DO_TUPLE = 50,	  /* size, ob_item, ob_size */
	DO_LIST = 53,	  /* size, ob_item, ob_size */
	DO_DICT = 56,	  /* size, ma_keys, ma_values */
	DO_FLOAT = 59,	  /* size, ob_fval */
	DO_LONG = 61,	  /* size, lv_tag, ob_digit */
	DO_BYTES = 64,	  /* size, ob_size, ob_sval */
	DO_UNICODE = 67,  /* size, state, length, asciiobject_size */
	DO_GC = 71,	  /* size, collecting */
	DO_COUNT = 73,
};
#define PF_PY_DEBUG_OFFSETS_BYTES (DO_COUNT * 8)

/* A field offset from the debug block: must be below `limit` (the struct's size, itself
 * bounded) or it is refused. */
static int debug_field(const uint64_t *d, unsigned idx, uint64_t limit, __u32 *out)
{
	if (d[idx] >= limit || d[idx] > (1u << 20))
		return -EINVAL;
	*out = (__u32)d[idx];
	return 0;
}

int pf_py_offsets_from_debug(const uint8_t *buf, size_t len, unsigned major, unsigned minor,
			     struct pf_py_offsets *out, struct pf_error *err)
{
	if (len < PF_PY_DEBUG_OFFSETS_BYTES || memcmp(buf, "xdebugpy", 8) != 0)
		return pf_error_set(err, -ENOTSUP, NULL,
				    "python %u.%u: no _Py_DebugOffsets at _PyRuntime", major,
				    minor);
	uint64_t d[DO_COUNT];
	memcpy(d, buf, sizeof(d));
	uint64_t ver = d[DO_VERSION];
	if ((ver >> 24) != major || ((ver >> 16) & 0xff) != minor)
		return pf_error_set(err, -ENOTSUP, NULL,
				    "python %u.%u: _Py_DebugOffsets version 0x%" PRIx64
				    " does not match",
				    major, minor, ver);
	if (minor != 13)
		return pf_error_set(err, -ENOTSUP, NULL, "python: %u.%u unsupported", major, minor);
	if (d[DO_FREE_THREADED])
		return pf_error_set(err, -ENOTSUP, NULL,
				    "python %u.%u: free-threaded build unsupported", major, minor);
	const uint64_t max_size = 1u << 20; /* no CPython struct is near 1 MiB */
	static const unsigned groups[] = {DO_RUNTIME,  DO_INTERP, DO_TSTATE, DO_IFRAME,	 DO_CODE,
					  DO_PYOBJECT, DO_TYPE,	  DO_TUPLE,  DO_LIST,	 DO_DICT,
					  DO_FLOAT,    DO_LONG,	  DO_BYTES,  DO_UNICODE, DO_GC};
	for (unsigned g = 0; g < PF_ARRAY_SIZE(groups); g++)
		if (d[groups[g]] == 0 || d[groups[g]] > max_size)
			return pf_error_set(err, -ENOTSUP, NULL,
					    "python %u.%u: _Py_DebugOffsets sizes insane", major,
					    minor);
	struct pf_py_offsets o = {
	    .version_hex = (__u32)(ver & 0xffffff00u),
	    .frame_kind = PF_PY_FRAMES_INTERP,
	    .interp_next = 0,
	    .cframe_current_frame = PF_PY_NONE,
	    .pyframe_back = PF_PY_NONE,
	    .pyframe_code = PF_PY_NONE,
	    .pyframe_lasti = PF_PY_NONE,
	    .iframe_is_entry = PF_PY_NONE,
	    .owner_cstack = 3, /* FRAME_OWNED_BY_CSTACK, Include/internal/pycore_frame.h */
	    .code_code = PF_PY_NONE,
	};
	const uint64_t *rt = d + DO_RUNTIME, *is = d + DO_INTERP, *ts = d + DO_TSTATE,
		       *fr = d + DO_IFRAME, *co = d + DO_CODE, *ob = d + DO_PYOBJECT,
		       *by = d + DO_BYTES, *un = d + DO_UNICODE;
	int r = 0;
	r |= debug_field(rt, 2, rt[0], &o.runtime_interpreters_head);
	r |= debug_field(is, 2, is[0], &o.interp_next);
	r |= debug_field(is, 3, is[0], &o.interp_threads_head);
	r |= debug_field(ts, 2, ts[0], &o.tstate_next);
	r |= debug_field(ts, 4, ts[0], &o.tstate_frame);
	r |= debug_field(ts, 5, ts[0], &o.tstate_thread_id);
	r |= debug_field(ts, 6, ts[0], &o.tstate_native_thread_id);
	r |= debug_field(fr, 1, fr[0], &o.iframe_previous);
	r |= debug_field(fr, 2, fr[0], &o.iframe_code);
	r |= debug_field(fr, 3, fr[0], &o.iframe_instr);
	r |= debug_field(fr, 5, fr[0], &o.iframe_owner);
	r |= debug_field(ob, 1, ob[0], &o.object_type);
	r |= debug_field(by, 1, by[0], &o.varobject_size);
	r |= debug_field(by, 2, by[0], &o.bytes_sval);
	r |= debug_field(co, 1, co[0], &o.code_filename);
	r |= debug_field(co, 2, co[0], &o.code_name);
	r |= debug_field(co, 3, co[0], &o.code_qualname);
	r |= debug_field(co, 4, co[0], &o.code_linetable);
	r |= debug_field(co, 5, co[0], &o.code_firstlineno);
	r |= debug_field(co, 9, co[0], &o.code_code_adaptive);
	r |= debug_field(un, 1, un[0], &o.unicode_state);
	r |= debug_field(un, 2, un[0], &o.unicode_length);
	if (r || co[0] > 4096 || un[3] < 16 || un[3] > 256)
		return pf_error_set(err, -ENOTSUP, NULL,
				    "python %u.%u: _Py_DebugOffsets fields out of range", major,
				    minor);
	o.code_basicsize = (__u32)co[0];
	o.unicode_ascii_size = (__u32)un[3];
	/* PyCompactUnicodeObject adds utf8_length and utf8 to PyASCIIObject (3.12+) */
	o.unicode_compact_size = (__u32)un[3] + 16;
	*out = o;
	return 0;
}

/* ---- /proc/PID/maps ---- */

struct map_file {
	uint64_t start, end, pgoff;
	uint64_t dev, ino;
	char path[PF_PY_PATH_MAX];
};

#define PF_PY_DEBUG_DIR "/usr/lib/debug"
#define MAX_FILE_MAPS 16 /* mappings of one file kept (a shared object has 4-5) */

/* The interpreter candidate: all mappings of one file */
struct candidate {
	struct map_file maps[MAX_FILE_MAPS];
	unsigned n;
	bool lib; /* a libpython3.X.so */
};

static const char *base_name(const char *path)
{
	const char *s = strrchr(path, '/');
	return s ? s + 1 : path;
}

/* The minor version a file name says ("libpython3.11.so.1.0", "python3.11"), or -1. */
static int name_minor(const char *path)
{
	const char *b = base_name(path);
	const char *p = NULL;
	if (strncmp(b, "libpython3.", 11) == 0)
		p = b + 11;
	else if (strncmp(b, "python3.", 8) == 0)
		p = b + 8;
	if (!p || !isdigit((unsigned char)*p))
		return -1;
	long m = strtol(p, NULL, 10);
	return m >= 0 && m < 100 ? (int)m : -1;
}

static bool is_libpython(const char *path)
{
	return strncmp(base_name(path), "libpython3", 10) == 0 && strstr(base_name(path), ".so");
}

/* Parses one maps line into *m; false when it is no file mapping. */
static bool parse_maps_line(const char *line, struct map_file *m)
{
	unsigned long long start, end, off, ino;
	unsigned maj, min;
	char perms[8];
	int path_at = 0;
	if (sscanf(line, "%llx-%llx %7s %llx %x:%x %llu %n", &start, &end, perms, &off, &maj, &min,
		   &ino, &path_at) < 7 ||
	    !path_at || line[path_at] != '/' || ino == 0)
		return false;
	size_t n = strcspn(line + path_at, "\n");
	if (n >= sizeof(m->path))
		return false;
	memcpy(m->path, line + path_at, n);
	m->path[n] = '\0';
	m->start = start;
	m->end = end;
	m->pgoff = off;
	m->dev = makedev(maj, min);
	m->ino = ino;
	return true;
}

/* ---- the ELF file ---- */

static void elf_endp(Elf **e)
{
	if (*e)
		elf_end(*e);
}

static void closep(int *fd)
{
	if (*fd >= 0)
		close(*fd);
}

/* Opens the mapped file m: path inside root (openat2 RESOLVE_IN_ROOT: a symlink the process
 * made cannot lead out of its root), checked to be the mapped inode; else the kernel's own
 * handle /proc/PID/map_files/START-END (a deleted file, a root we cannot walk). */
static int open_mapped(int pid, const char *root, const struct map_file *m)
{
	char path[PF_PY_PATH_MAX + 64];
	int fd = -1;
	int rfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (rfd >= 0) {
		struct open_how how = {.flags = O_RDONLY | O_CLOEXEC | O_NONBLOCK,
				       .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS};
		fd = (int)syscall(SYS_openat2, rfd, m->path + 1, &how, sizeof(how));
		if (fd < 0 && errno == ENOSYS)
			fd = openat(rfd, m->path + 1, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
		close(rfd);
		struct stat st;
		if (fd >= 0 && (fstat(fd, &st) < 0 || st.st_ino != m->ino || st.st_dev != m->dev ||
				!S_ISREG(st.st_mode))) {
			close(fd);
			fd = -1;
		}
	}
	if (fd < 0) {
		snprintf(path, sizeof(path), "/proc/%d/map_files/%" PRIx64 "-%" PRIx64, pid,
			 m->start, m->end);
		fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	}
	return fd;
}

struct sym {
	uint64_t value, size;
	bool found;
};

enum {
	S_RUNTIME,
	S_CODE_TYPE,
	S_VERSION,
	S_EVAL,
	S_EVAL_COLD,
	S_UNICODE_TYPE,
	S_BYTES_TYPE,
	S_COUNT
};
static const char *const sym_names[S_COUNT] = {
    [S_RUNTIME] = "_PyRuntime",
    [S_CODE_TYPE] = "PyCode_Type",
    [S_VERSION] = "Py_Version",
    [S_EVAL] = "_PyEval_EvalFrameDefault",
    [S_EVAL_COLD] = "_PyEval_EvalFrameDefault.cold",
    [S_UNICODE_TYPE] = "PyUnicode_Type",
    [S_BYTES_TYPE] = "PyBytes_Type",
};

/* Looks the symbols up in the sections of type `type` (SHT_DYNSYM, SHT_SYMTAB): defined ones
 * only (an executable linked against libpython names _PyRuntime as undefined). */
static bool sym_wanted(void *ctx, const char *name, const GElf_Sym *s)
{
	struct sym *out = ctx;
	if ((name[0] != '_' && name[0] != 'P') || (name[0] == '_' && name[1] == 'Z'))
		return true;
	for (unsigned k = 0; k < S_COUNT; k++) {
		if (!out[k].found && strcmp(name, sym_names[k]) == 0) {
			out[k] = (struct sym){s->st_value, s->st_size, true};
			break;
		}
	}
	return true;
}

static void find_symbols_in(Elf *elf, unsigned type, struct sym *out)
{
	pf_elf_each_sym(elf, type, sym_wanted, out);
}

/* .dynsym first: every CPython exports _PyRuntime there (extension modules link against it:
 * libpython's exports, or an executable built with -export-dynamic), so a file whose .dynsym
 * lacks it is no interpreter and its .symtab (a large C++ program's can have a million
 * entries) is not read, unless its name says it is one (python3.X). Then .symtab for the
 * local symbols (the .cold part). */
static void find_symbols(Elf *elf, const char *path, struct sym *out)
{
	find_symbols_in(elf, SHT_DYNSYM, out);
	if (out[S_RUNTIME].found || name_minor(path) >= 0)
		find_symbols_in(elf, SHT_SYMTAB, out);
}

static bool has_symtab(Elf *elf)
{
	Elf_Scn *scn = NULL;
	GElf_Shdr sh;
	while ((scn = elf_nextscn(elf, scn)))
		if (gelf_getshdr(scn, &sh) && sh.sh_type == SHT_SYMTAB)
			return true;
	return false;
}

/* The file's GNU build id in hex into hex[0, cap). 0, -ENOENT. */
static int build_id(Elf *elf, char *hex, size_t cap)
{
	Elf_Scn *scn = NULL;
	GElf_Shdr sh;
	while ((scn = elf_nextscn(elf, scn))) {
		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_NOTE)
			continue;
		Elf_Data *d = elf_getdata(scn, NULL);
		GElf_Nhdr nh;
		size_t off = 0, name_off, desc_off;
		while (d && (off = gelf_getnote(d, off, &nh, &name_off, &desc_off)) > 0) {
			if (nh.n_type != NT_GNU_BUILD_ID || nh.n_namesz != 4 ||
			    memcmp((const char *)d->d_buf + name_off, "GNU", 4) != 0 ||
			    nh.n_descsz < 8 || nh.n_descsz * 2 + 1 > cap)
				continue;
			const uint8_t *id = (const uint8_t *)d->d_buf + desc_off;
			for (size_t i = 0; i < nh.n_descsz; i++)
				snprintf(hex + 2 * i, 3, "%02x", id[i]);
			return 0;
		}
	}
	return -ENOENT;
}

/* A stripped file's .symtab lives in its separate debug file (Debian's -dbgsym packages):
 * PF_PY_DEBUG_DIR/.build-id/xx/yyyy.debug, on the agent's host (the same build id is the
 * same file). Fills the symbols not found yet. */
static void find_debug_symbols(Elf *elf, struct sym *s)
{
	char id[128], path[sizeof(id) + 64];
	if (has_symtab(elf) || build_id(elf, id, sizeof(id)) < 0)
		return;
	snprintf(path, sizeof(path), PF_PY_DEBUG_DIR "/.build-id/%.2s/%s.debug", id, id + 2);
	_cleanup_(closep) int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return;
	_cleanup_(elf_endp) Elf *dbg = elf_begin(fd, ELF_C_READ, NULL);
	if (dbg && elf_kind(dbg) == ELF_K_ELF)
		find_symbols_in(dbg, SHT_SYMTAB, s);
}

/* Reads len bytes at ELF virtual address vaddr from the file (through its PT_LOAD segments).
 * 0, -ENOENT when no segment holds them in the file. */
static int read_vaddr(int fd, Elf *elf, uint64_t vaddr, void *buf, size_t len)
{
	size_t n;
	if (elf_getphdrnum(elf, &n) < 0)
		return -ENOENT;
	for (size_t i = 0; i < n; i++) {
		GElf_Phdr ph;
		if (!gelf_getphdr(elf, (int)i, &ph) || ph.p_type != PT_LOAD)
			continue;
		if (vaddr < ph.p_vaddr || vaddr - ph.p_vaddr + len > ph.p_filesz)
			continue;
		ssize_t r = pread(fd, buf, len, (off_t)(ph.p_offset + (vaddr - ph.p_vaddr)));
		return r == (ssize_t)len ? 0 : -EIO;
	}
	return -ENOENT;
}

/* The load bias of the file from its mappings: a mapping at page offset pgoff holds the
 * PT_LOAD whose p_offset rounds down to it. */
static int load_bias(Elf *elf, const struct candidate *c, uint64_t *bias)
{
	size_t n;
	if (elf_getphdrnum(elf, &n) < 0)
		return -EINVAL;
	for (unsigned k = 0; k < c->n; k++) {
		for (size_t i = 0; i < n; i++) {
			GElf_Phdr ph;
			if (!gelf_getphdr(elf, (int)i, &ph) || ph.p_type != PT_LOAD)
				continue;
			uint64_t page = 4096;
			if ((ph.p_offset & ~(page - 1)) != c->maps[k].pgoff)
				continue;
			*bias = c->maps[k].start - (ph.p_vaddr & ~(page - 1));
			return 0;
		}
	}
	return -EINVAL;
}

/* Version from the version strings in the file's read-only data: PY_VERSION ("3.10.13") is
 * a string of its own or the tail of a longer one the linker merged it into (so it may follow
 * any byte but a digit or a dot). Candidates "3.M.P" NUL-terminated; want_minor (from the
 * file name, or -1) picks among them, else the largest minor (unicodedata's "3.2.0" is also
 * there). */
static int version_from_strings(int fd, Elf *elf, int want_minor, unsigned *minor, unsigned *micro)
{
	Elf_Scn *scn = NULL;
	int best = -1, best_micro = 0;
	size_t shstrndx;
	if (elf_getshdrstrndx(elf, &shstrndx) < 0)
		return -ENOENT;
	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_PROGBITS)
			continue;
		const char *name = elf_strptr(elf, shstrndx, sh.sh_name);
		if (!name || strcmp(name, ".rodata") != 0 || sh.sh_size > (64u << 20))
			continue;
		_cleanup_free_ char *data = malloc(sh.sh_size + 1);
		if (!data)
			return -ENOMEM;
		if (pread(fd, data, sh.sh_size, (off_t)sh.sh_offset) != (ssize_t)sh.sh_size)
			return -EIO;
		data[sh.sh_size] = '\0';
		for (size_t i = 1; i + 4 < sh.sh_size; i++) {
			if (data[i] != '3' || data[i + 1] != '.' ||
			    isdigit((unsigned char)data[i - 1]) || data[i - 1] == '.')
				continue;
			char *end;
			long m = strtol(data + i + 2, &end, 10);
			if (end == data + i + 2 || *end != '.' || m < 0 || m > 99)
				continue;
			char *end2;
			long p = strtol(end + 1, &end2, 10);
			if (end2 == end + 1 || p < 0 || p > 999)
				continue;
			/* a release level may follow: 3.13.0rc1, 3.12.0+ */
			while (*end2 && (isalnum((unsigned char)*end2) || *end2 == '+') &&
			       end2 - (data + i) < 16)
				end2++;
			if (*end2 != '\0')
				continue;
			if (want_minor >= 0 ? m == want_minor : m > best) {
				best = (int)m;
				best_micro = (int)p;
				if (want_minor >= 0)
					break;
			}
		}
	}
	if (best < 0)
		return -ENOENT;
	*minor = (unsigned)best;
	*micro = (unsigned)best_micro;
	return 0;
}

/* ---- What a file holds, cached ----
 *
 * The symbol scan reads the file's whole .dynsym (a compiler's is megabytes), and every process
 * of an executable asks about the same file: a build host starts hundreds of cc1 a minute. So
 * the answer per file — no CPython, or its symbols — is kept, keyed by device, inode, size and
 * modification time (a file replaced in place is read again). FILE_CACHE_SLOTS entries,
 * replaced in turn; what a process adds (its load bias, its memory) is never cached. */

#define FILE_CACHE_SLOTS 128

struct file_key {
	uint64_t dev, ino;
	int64_t size, mtime_s, mtime_ns;
};

struct file_facts {
	struct file_key key;
	bool used, python;
	struct sym s[S_COUNT];
};

static struct {
	pthread_mutex_t lock;
	struct file_facts slot[FILE_CACHE_SLOTS];
	unsigned next;
	struct pf_py_file_cache_stats st;
} file_cache = {.lock = PTHREAD_MUTEX_INITIALIZER};

void pf_py_file_cache_stats(struct pf_py_file_cache_stats *out)
{
	pthread_mutex_lock(&file_cache.lock);
	*out = file_cache.st;
	pthread_mutex_unlock(&file_cache.lock);
}

static bool file_key_of(int fd, struct file_key *k)
{
	struct stat st;
	if (fstat(fd, &st) < 0)
		return false;
	*k = (struct file_key){st.st_dev, st.st_ino, st.st_size, st.st_mtim.tv_sec,
			       st.st_mtim.tv_nsec};
	return true;
}

/* The cached facts of file k into *f; false when none. */
static bool file_cache_get(const struct file_key *k, struct file_facts *f)
{
	bool hit = false;
	pthread_mutex_lock(&file_cache.lock);
	for (unsigned i = 0; i < FILE_CACHE_SLOTS && !hit; i++) {
		const struct file_facts *e = &file_cache.slot[i];
		if (e->used && memcmp(&e->key, k, sizeof(*k)) == 0) {
			*f = *e;
			hit = true;
		}
	}
	if (hit)
		file_cache.st.hits++;
	pthread_mutex_unlock(&file_cache.lock);
	return hit;
}

static void file_cache_put(const struct file_facts *f)
{
	pthread_mutex_lock(&file_cache.lock);
	file_cache.slot[file_cache.next] = *f;
	file_cache.slot[file_cache.next].used = true;
	file_cache.next = (file_cache.next + 1) % FILE_CACHE_SLOTS;
	file_cache.st.reads++;
	pthread_mutex_unlock(&file_cache.lock);
}

/* The interpreter's symbols of the open file at path into s[]; false when it holds no
 * CPython. From the cache when the same file was read before. */
static bool file_symbols(int fd, Elf *elf, const char *path, struct sym *s)
{
	struct file_facts f = {0};
	bool keyed = file_key_of(fd, &f.key);
	if (keyed && file_cache_get(&f.key, &f)) {
		memcpy(s, f.s, sizeof(f.s));
		return f.python;
	}
	memset(s, 0, sizeof(f.s));
	find_symbols(elf, path, s);
	f.python = s[S_RUNTIME].found && s[S_EVAL].found;
	if (f.python && !s[S_EVAL_COLD].found)
		find_debug_symbols(elf, s);
	memcpy(f.s, s, sizeof(f.s));
	if (keyed)
		file_cache_put(&f);
	return f.python;
}

/* Inspects one candidate file. 0 and *out filled; -ENOENT when the file holds no CPython. */
static int inspect(int pid, const char *root, const struct candidate *c, struct pf_py_process *out,
		   struct pf_error *err)
{
	_cleanup_(closep) int fd = open_mapped(pid, root, &c->maps[0]);
	if (fd < 0)
		return errno == ENOENT && access(root, F_OK) < 0 ? -ESRCH : -ENOENT;
	if (elf_version(EV_CURRENT) == EV_NONE)
		return -ENOTSUP;
	_cleanup_(elf_endp) Elf *elf = elf_begin(fd, ELF_C_READ, NULL);
	if (!elf || elf_kind(elf) != ELF_K_ELF || gelf_getclass(elf) != ELFCLASS64)
		return -ENOENT;
	struct sym s[S_COUNT];
	if (!file_symbols(fd, elf, c->maps[0].path, s))
		return -ENOENT;

	const struct map_file *m0 = &c->maps[0];
	memset(out, 0, sizeof(*out));
	out->pid = pid;
	out->major = 3;
	out->shared = c->lib;
	out->dev = m0->dev;
	out->ino = m0->ino;
	snprintf(out->path, sizeof(out->path), "%s", m0->path);
	if (load_bias(elf, c, &out->bias) < 0)
		return pf_error_set(err, -ENOTSUP, NULL, "python: %s: no mapping of its code",
				    out->path);

	int name_m = name_minor(m0->path);
	uint32_t hex = 0;
	if (s[S_VERSION].found && s[S_VERSION].size == 4 &&
	    read_vaddr(fd, elf, s[S_VERSION].value, &hex, 4) == 0 && (hex >> 24) == 3) {
		out->minor = (hex >> 16) & 0xff;
		out->micro = (hex >> 8) & 0xff;
	} else if (version_from_strings(fd, elf, name_m, &out->minor, &out->micro) < 0) {
		if (name_m < 0)
			return pf_error_set(err, -ENOTSUP, NULL, "python: %s: version not found",
					    out->path);
		out->minor = (unsigned)name_m;
	}
	snprintf(out->version, sizeof(out->version), "3.%u.%u", out->minor, out->micro);
	if (out->minor < 9 || out->minor > 13)
		return pf_error_set(err, -ENOTSUP, NULL, "python: 3.%u unsupported", out->minor);
	if (!s[S_CODE_TYPE].found)
		return pf_error_set(err, -ENOTSUP, NULL, "python %s: no PyCode_Type symbol",
				    out->version);

	out->runtime_addr = s[S_RUNTIME].value + out->bias;
	out->code_type_addr = s[S_CODE_TYPE].value + out->bias;
	if (s[S_UNICODE_TYPE].found)
		out->unicode_type_addr = s[S_UNICODE_TYPE].value + out->bias;
	if (s[S_BYTES_TYPE].found)
		out->bytes_type_addr = s[S_BYTES_TYPE].value + out->bias;
	out->eval[out->n_eval++] = (struct pf_py_range){
	    s[S_EVAL].value + out->bias, s[S_EVAL].value + out->bias + pf_max(s[S_EVAL].size, 1)};
	if (s[S_EVAL_COLD].found)
		out->eval[out->n_eval++] = (struct pf_py_range){s[S_EVAL_COLD].value + out->bias,
								s[S_EVAL_COLD].value + out->bias +
								    pf_max(s[S_EVAL_COLD].size, 1)};

	const struct pf_py_offsets *t = pf_py_offsets_table(out->minor);
	if (t) {
		out->off = *t;
		out->offsets_source = PF_PY_OFFSETS_TABLE;
	} else {
		/* 3.13+: the runtime's debug offsets, from the live process (what it runs) or,
		 * before the first read succeeds, the file's initialized .data (the same bytes:
		 * _PyRuntime is a static initializer) */
		uint8_t buf[PF_PY_DEBUG_OFFSETS_BYTES];
		int r = pf_py_read_mem(pid, out->runtime_addr, buf, sizeof(buf));
		if (r == -ESRCH)
			return r;
		if (r < 0 && read_vaddr(fd, elf, s[S_RUNTIME].value, buf, sizeof(buf)) < 0)
			return pf_error_set(err, -EFAULT, NULL, "python %s: _PyRuntime unreadable",
					    out->version);
		r = pf_py_offsets_from_debug(buf, sizeof(buf), 3, out->minor, &out->off, err);
		if (r < 0)
			return r;
		out->offsets_source = PF_PY_OFFSETS_DEBUG;
	}
	out->off.version_hex = (3u << 24) | (out->minor << 16) | (out->micro << 8);
	return 0;
}

int pf_py_detect(int pid, const char *root, struct pf_py_process *out, struct pf_error *err)
{
	char path[64], rootbuf[64];
	if (!root) {
		snprintf(rootbuf, sizeof(rootbuf), "/proc/%d/root", pid);
		root = rootbuf;
	}
	snprintf(path, sizeof(path), "/proc/%d/exe", pid);
	struct stat exe;
	bool have_exe = stat(path, &exe) == 0;
	snprintf(path, sizeof(path), "/proc/%d/maps", pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return errno == ENOENT
			   ? -ESRCH
			   : pf_error_set(err, -errno, NULL, "%s: %s", path, strerror(errno));
	/* libpython first (in a shared build the executable holds no interpreter), then the
	 * executable */
	_cleanup_free_ struct candidate *lib = calloc(1, sizeof(*lib));
	_cleanup_free_ struct candidate *exe_c = calloc(1, sizeof(*exe_c));
	if (!lib || !exe_c) {
		fclose(f);
		return -ENOMEM;
	}
	lib->lib = true;
	char line[PF_PY_PATH_MAX + 128];
	struct map_file m;
	while (fgets(line, sizeof(line), f)) {
		if (!parse_maps_line(line, &m))
			continue;
		struct candidate *c = NULL;
		if (is_libpython(m.path))
			c = lib;
		else if (have_exe && m.ino == exe.st_ino && m.dev == exe.st_dev)
			c = exe_c;
		if (!c || c->n >= MAX_FILE_MAPS)
			continue;
		if (c->n && (c->maps[0].ino != m.ino || c->maps[0].dev != m.dev))
			continue; /* a second libpython: the first one mapped is the one in use */
		c->maps[c->n++] = m;
	}
	fclose(f);
	struct candidate *order[2] = {lib, exe_c};
	for (unsigned i = 0; i < 2; i++) {
		if (!order[i]->n)
			continue;
		int r = inspect(pid, root, order[i], out, err);
		if (r != -ENOENT)
			return r;
	}
	return -ENOENT;
}
