/* python_offsets.h — where CPython keeps what a stack walk reads, as one block of plain
 * fixed-width numbers shared by the kernel walk (BPF) and user space.
 *
 * Owns: struct pf_py_offsets, the layout of one CPython minor version (3.9–3.13): the path from
 * _PyRuntime to each thread's current frame, the frame chain, and the code-object, string and
 * bytes fields user space reads to name a frame. python_proc.c fills it, from the
 * interpreter's own _Py_DebugOffsets (3.13+) or from the agent's table of that minor version.
 * Every offset is in bytes from the start of the named struct; PF_PY_NONE marks a field the
 * version does not have.
 *
 * The walk (all reads from the sampled process's memory, 8-byte pointers, x86_64/arm64):
 *
 *   interp  = *(_PyRuntime + runtime_interpreters_head)          main interpreter first
 *   tstate  = *(interp + interp_threads_head)
 *   while tstate: match *(tstate + tstate_thread_id) (pthread_t: on x86_64 glibc the thread's
 *                 fsbase) or *(tstate + tstate_native_thread_id) (the kernel tid, 3.11+);
 *                 tstate = *(tstate + tstate_next)
 *   frame   = *(tstate + tstate_frame)
 *   if cframe_current_frame != PF_PY_NONE: frame = *(frame + cframe_current_frame)  (3.11–3.12)
 *
 *   frame_kind PF_PY_FRAMES_OBJECT (3.9–3.10), frame is a PyFrameObject *:
 *     code = *(frame + pyframe_code); lasti = *(int *)(frame + pyframe_lasti);
 *     next = *(frame + pyframe_back). One _PyEval_EvalFrameDefault call runs one frame.
 *   frame_kind PF_PY_FRAMES_INTERP (3.11+), frame is a _PyInterpreterFrame *:
 *     code  = *(frame + iframe_code)  (3.13: f_executable, check its ob_type == PyCode_Type)
 *     instr = *(frame + iframe_instr) (prev_instr 3.11–3.12, instr_ptr 3.13)
 *     offset = instr - (code + code_code_adaptive), in bytes
 *     owner = *(u8 *)(frame + iframe_owner); a frame with owner == owner_cstack (3.12+) is a
 *     shim the C stack owns: skip it, it carries no Python code.
 *     is_entry = *(u8 *)(frame + iframe_is_entry) (3.11 only): the last frame this
 *     _PyEval_EvalFrameDefault call runs; 3.12+: the frame whose previous is owned by the C
 *     stack (owner_cstack).
 *     next = *(frame + iframe_previous).
 *
 * Per frame the kernel records the code object's address and the instruction value above
 * (lasti, or the byte offset); it may add the int at code + code_firstlineno as a key, so
 * user space can tell an object freed and replaced after the sample
 * (pf_py_names_resolve_key).
 *
 * No libc, no kernel headers beyond the fixed-width types, so the .bpf.c can include it after
 * vmlinux.h. */
#ifndef PF_AGENT_PYTHON_OFFSETS_H
#define PF_AGENT_PYTHON_OFFSETS_H

#if !defined(__bpf__) && !defined(__VMLINUX_H__)
#include <linux/types.h>
#endif

#define PF_PY_NONE 0xffffffffu /* the version has no such field */

/* frame_kind */
#define PF_PY_FRAMES_OBJECT 1 /* 3.9–3.10: PyFrameObject chained by f_back */
#define PF_PY_FRAMES_INTERP 2 /* 3.11+: _PyInterpreterFrame chained by previous */

/* lasti_unit: what the pyframe_lasti value counts (PF_PY_FRAMES_OBJECT) */
#define PF_PY_LASTI_BYTES 1 /* 3.9: byte offset of the last instruction */
#define PF_PY_LASTI_UNITS 2 /* 3.10: index of the last 2-byte code unit */

struct pf_py_offsets {
	__u32 version_hex; /* (major << 24) | (minor << 16) | (micro << 8), as PY_VERSION_HEX
			    * without the release level */
	__u32 frame_kind;  /* PF_PY_FRAMES_* */

	/* _PyRuntimeState */
	__u32 runtime_interpreters_head; /* interpreters.head (PyInterpreterState *) */
	/* PyInterpreterState */
	__u32 interp_next;         /* next (PyInterpreterState *) */
	__u32 interp_threads_head; /* tstate_head (3.9–3.11), threads.head (3.12+) */
	/* PyThreadState */
	__u32 tstate_next;             /* next (PyThreadState *) */
	__u32 tstate_thread_id;        /* thread_id (unsigned long: pthread_self()) */
	__u32 tstate_native_thread_id; /* native_thread_id (unsigned long: gettid()), 3.11+ */
	__u32 tstate_frame;            /* frame (3.9–3.10), cframe (3.11–3.12),
				        * current_frame (3.13+) */
	__u32 cframe_current_frame;    /* _PyCFrame.current_frame (3.11–3.12) */

	/* PyFrameObject (PF_PY_FRAMES_OBJECT) */
	__u32 pyframe_back;  /* f_back (PyFrameObject *) */
	__u32 pyframe_code;  /* f_code (PyCodeObject *) */
	__u32 pyframe_lasti; /* f_lasti (int) */
	__u32 lasti_unit;    /* PF_PY_LASTI_*, 0 for PF_PY_FRAMES_INTERP */

	/* _PyInterpreterFrame (PF_PY_FRAMES_INTERP) */
	__u32 iframe_previous; /* previous (_PyInterpreterFrame *) */
	__u32 iframe_code;     /* f_code (3.11–3.12), f_executable (3.13+) */
	__u32 iframe_instr;    /* prev_instr (3.11–3.12), instr_ptr (3.13+) (_Py_CODEUNIT *) */
	__u32 iframe_owner;    /* owner (char) */
	__u32 iframe_is_entry; /* is_entry (bool), 3.11 only */
	__u32 owner_cstack;    /* the owner value FRAME_OWNED_BY_CSTACK (3.12+) */

	/* PyObject / PyVarObject */
	__u32 object_type; /* ob_type */
	__u32 varobject_size; /* ob_size */

	/* PyCodeObject */
	__u32 code_basicsize;     /* sizeof(PyCodeObject): the bytes read to parse one; the
				   * 3.11+ instructions follow at code_code_adaptive */
	__u32 code_code_adaptive; /* co_code_adaptive (3.11+): first code unit; ob_size counts
				   * the code units */
	__u32 code_code;          /* co_code (PyBytesObject *), 3.9–3.10 */
	__u32 code_filename;      /* co_filename (str) */
	__u32 code_name;          /* co_name (str) */
	__u32 code_qualname;      /* co_qualname (str), 3.11+ */
	__u32 code_linetable;     /* co_lnotab (3.9), co_linetable (3.10+) (bytes) */
	__u32 code_firstlineno;   /* co_firstlineno (int) */

	/* str (PyASCIIObject / PyCompactUnicodeObject) */
	__u32 unicode_length;       /* length (code points) */
	__u32 unicode_state;        /* state bit field: kind bits 2–4, compact bit 5,
				     * ascii bit 6 in 3.9–3.13 */
	__u32 unicode_ascii_size;   /* sizeof(PyASCIIObject): data of a compact ASCII str */
	__u32 unicode_compact_size; /* sizeof(PyCompactUnicodeObject): data of other compact
				     * strs */
	/* bytes (PyBytesObject) */
	__u32 bytes_sval; /* ob_sval; its length is the ob_size at varobject_size */
	__u32 reserved;
};

#endif
