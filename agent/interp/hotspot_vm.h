/* hotspot_vm.h — HotSpot's (OpenJDK's) self-description tables, read from a JVM's memory.
 *
 * Owns: the parse of gHotSpotVMStructs (type, field, static address or offset) and
 * gHotSpotVMTypes (type, size) that libjvm.so exports for serviceability agents, into the
 * offsets a frame walk and the naming of Java frames need: the code cache and its heaps (their
 * GrowableArray, HeapBlock), CodeBlob, nmethod, Method, ConstMethod, ConstantPool, Klass and
 * Symbol. The tables' entry layout (field offsets
 * and strides) comes from the library's own exported *EntryXxxOffset / *ArrayStride symbols;
 * the caller resolves those and gives a reader of the process's memory, so the parse is
 * independent of where the bytes come from. Every entry is read through that reader with
 * bounded lengths: the memory is the profiled process's and is not trusted.
 *
 * Bounds: at most PF_HS_MAX_ENTRIES entries per table, names up to PF_HS_NAME_MAX bytes.
 * Thread-safe (no state). */
#ifndef PF_AGENT_HOTSPOT_VM_H
#define PF_AGENT_HOTSPOT_VM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PF_HS_MAX_ENTRIES 16384
#define PF_HS_NAME_MAX 96
#define PF_HS_MISSING_LEN 96

/* Reads len bytes at addr of the process: 0, or a negative errno. */
typedef int (*pf_hs_read_fn)(void *ctx, uint64_t addr, void *buf, size_t len);

/* Where the tables are and how their entries are laid out (the exported symbols' values). */
struct pf_hs_layout {
	uint64_t structs; /* address of the first VMStructEntry */
	uint64_t types;	  /* address of the first VMTypeEntry */
	uint32_t s_stride, s_type_name, s_field_name, s_is_static, s_offset, s_address;
	uint32_t t_stride, t_type_name, t_size;
	uint64_t consts; /* address of the first VMIntConstantEntry; 0: none read */
	uint32_t c_stride, c_name, c_value;
};

/* The layout JDK 17's libjvm.so exports on 64-bit machines (the values of its
 * gHotSpotVM*Entry*Offset and *ArrayStride symbols), with the tables at structs and types. */
#define PF_HS_LAYOUT_JDK17(structs_addr, types_addr)                                               \
	((struct pf_hs_layout){.structs = (structs_addr),                                          \
			       .types = (types_addr),                                              \
			       .s_stride = 48,                                                     \
			       .s_type_name = 0,                                                   \
			       .s_field_name = 8,                                                  \
			       .s_is_static = 24,                                                  \
			       .s_offset = 32,                                                     \
			       .s_address = 40,                                                    \
			       .t_stride = 40,                                                     \
			       .t_type_name = 0,                                                   \
			       .t_size = 32})

/* The fields, by (type, field, required). Static fields (CodeCache::_heaps) give the
 * variable's address, the others their offset in the object. Of the pairs JDKs name
 * differently one is needed: CodeBlob::_code_begin or _code_offset; nmethod::_method (newer
 * JDKs) or CompiledMethod::_method (JDK 17, its base class), which then is nm_method too. */
#define PF_HS_FIELDS(X)                                                                            \
	X(codecache_heaps, "CodeCache", "_heaps", 1)                                               \
	X(codeheap_memory, "CodeHeap", "_memory", 1)                                               \
	X(codeheap_segmap, "CodeHeap", "_segmap", 1)                                               \
	X(codeheap_log2_seg, "CodeHeap", "_log2_segment_size", 1)                                  \
	X(vspace_low, "VirtualSpace", "_low", 1)                                                   \
	X(vspace_high, "VirtualSpace", "_high", 1)                                                 \
	X(blob_name, "CodeBlob", "_name", 1)                                                       \
	X(blob_size, "CodeBlob", "_size", 1)                                                       \
	X(blob_frame_size, "CodeBlob", "_frame_size", 1)                                           \
	X(blob_code_begin, "CodeBlob", "_code_begin", 0)                                           \
	X(blob_code_offset, "CodeBlob", "_code_offset", 0)                                         \
	X(nm_method, "nmethod", "_method", 0)                                                      \
	X(cm_method, "CompiledMethod", "_method", 0)                                               \
	X(nm_entry_bci, "nmethod", "_entry_bci", 0)                                                \
	X(method_const, "Method", "_constMethod", 1)                                               \
	X(cm_constants, "ConstMethod", "_constants", 1)                                            \
	X(cm_name_index, "ConstMethod", "_name_index", 1)                                          \
	X(cm_sig_index, "ConstMethod", "_signature_index", 1)                                      \
	X(cm_flags, "ConstMethod", "_flags", 0)                                                    \
	X(cm_code_size, "ConstMethod", "_code_size", 0)                                            \
	X(cp_holder, "ConstantPool", "_pool_holder", 1)                                            \
	X(klass_name, "Klass", "_name", 1)                                                         \
	X(symbol_length, "Symbol", "_length", 1)                                                   \
	X(symbol_body, "Symbol", "_body", 1)                                                       \
	X(codecache_low, "CodeCache", "_low_bound", 1)                                             \
	X(codecache_high, "CodeCache", "_high_bound", 1)                                           \
	X(garray_len, "GrowableArrayBase", "_len", 1)                                              \
	X(garray_data, "GrowableArray<int>", "_data", 1)                                           \
	X(heapblock_used, "HeapBlock::Header", "_used", 1)                                         \
	X(cp_source_file, "ConstantPool", "_source_file_name_index", 0)                            \
	X(cp_length, "ConstantPool", "_length", 0)                                                 \
	X(nm_comp_level, "nmethod", "_comp_level", 0)                                              \
	X(nm_scopes_pcs, "nmethod", "_scopes_pcs_offset", 0)                                       \
	X(nm_dependencies, "nmethod", "_dependencies_offset", 0)                                   \
	X(nm_metadata, "nmethod", "_metadata_offset", 0)                                           \
	X(nm_scopes_data, "nmethod", "_scopes_data_begin", 0)                                      \
	X(cm_scopes_data, "CompiledMethod", "_scopes_data_begin", 0)                               \
	X(pcdesc_pc, "PcDesc", "_pc_offset", 0)                                                    \
	X(pcdesc_scope, "PcDesc", "_scope_decode_offset", 0)                                       \
	X(vspace_low_bound, "VirtualSpace", "_low_boundary", 0)                                    \
	X(vspace_high_bound, "VirtualSpace", "_high_boundary", 0)                                  \
	X(blob_frame_complete, "CodeBlob", "_frame_complete_offset", 0)                            \
	X(interp_code, "AbstractInterpreter", "_code", 0)                                          \
	X(stubq_buffer, "StubQueue", "_stub_buffer", 0)                                            \
	X(stubq_limit, "StubQueue", "_buffer_limit", 0)

/* The integer constants (gHotSpotVMIntConstants), by (name, required); when the layout names
 * no constants table (consts 0) none is read and each is 0. */
#define PF_HS_CONSTS(X)                                                                            \
	X(c_has_linenumbers, "ConstMethod::_has_linenumber_table", 0)                              \
	X(c_fr_sender_sp, "frame::interpreter_frame_sender_sp_offset", 0)                          \
	X(c_fr_last_sp, "frame::interpreter_frame_last_sp_offset", 0)

/* The type sizes, by (type, required). */
#define PF_HS_TYPES(X)                                                                             \
	X(size_constmethod, "ConstMethod", 1)                                                      \
	X(size_constantpool, "ConstantPool", 1)                                                    \
	X(size_heapblock, "HeapBlock", 1)                                                          \
	X(size_pcdesc, "PcDesc", 0)

struct pf_hs_vm {
#define PF_HS_MEMBER(m, ...) uint64_t m;
	PF_HS_FIELDS(PF_HS_MEMBER)
	PF_HS_TYPES(PF_HS_MEMBER)
#undef PF_HS_MEMBER
#define PF_HS_CONST_MEMBER(m, ...) int32_t m;
	PF_HS_CONSTS(PF_HS_CONST_MEMBER)
#undef PF_HS_CONST_MEMBER
	/* bit i: item i (the fields in order, then the types, then the constants) was found */
	uint64_t present;
};

/* Parses the tables (the constants' too when l->consts is set). 0; -ENOTSUP when a required item is
 * missing (its "Type::field" or type name in missing, may be NULL), -EINVAL for a layout whose
 * offsets do not fit its strides, -E2BIG for a table without its end within PF_HS_MAX_ENTRIES, or
 * the reader's error. *out is all zero on failure. */
/* Reads the NUL-terminated string at addr into buf[0, PF_HS_NAME_MAX) (a longer one is cut).
 * 0 or the reader's error. */
int pf_hs_read_str(pf_hs_read_fn rd, void *ctx, uint64_t addr, char *buf);

int pf_hs_vm_parse(const struct pf_hs_layout *l, pf_hs_read_fn rd, void *ctx, struct pf_hs_vm *out,
		   char *missing, size_t missing_len);

/* The offset of a compiled method's scopes data pointer (nmethod::_scopes_data_begin, or
 * CompiledMethod's in JDK 17), when vm has everything the scope descriptors are read with
 * (the PcDesc table's bounds and layout, the metadata array); else 0. */
uint64_t pf_hs_vm_scopes(const struct pf_hs_vm *vm);

/* True when vm has what the kernel's walk of Java frames needs besides the code heaps: the
 * heaps' reserved bounds, CodeBlob::_frame_complete_offset, the interpreter's codelets
 * (AbstractInterpreter::_code, a StubQueue) and the interpreter frame's slot constants. */
bool pf_hs_vm_walkable(const struct pf_hs_vm *vm);

#endif
