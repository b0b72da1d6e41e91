/* v8_meta.h — V8's postmortem metadata, read from the file that holds the engine.
 *
 * Owns: the `v8dbg_*` constants a `node` executable or a libnode.so exports (V8 builds them
 * into every binary made with v8_postmortem_support, which Node enables): the frame layout
 * (slot offsets from the frame pointer, the frame-type markers), the heap object layout
 * (tagging, HeapObject → Map → instance type, JSFunction → SharedFunctionInfo → name and
 * Script → name) and the instance types of the objects a frame is named from. Each constant is
 * a 4-byte int in the file's data (.data; .bss ones are 0); nothing is read from a process.
 *
 * A file without them, or without one the walk or the naming needs, gets -ENOTSUP and the
 * name of the first missing constant (for the agent's health: the caller then keeps the
 * process's native stacks). Thread-safe (no state). */
#ifndef PF_AGENT_V8_META_H
#define PF_AGENT_V8_META_H

#include <stdbool.h>
#include <stdint.h>

/* The constants, by their name without the "v8dbg_" prefix. */
#define PF_V8_META_FIELDS(X)                                                                       \
	X(tagged_size, "TaggedSize", true)                                                         \
	X(pointer_size, "SystemPointerSize", true)                                                 \
	X(heap_object_tag, "HeapObjectTag", true)                                                  \
	X(heap_object_tag_mask, "HeapObjectTagMask", true)                                         \
	X(smi_tag, "SmiTag", true)                                                                 \
	X(smi_tag_mask, "SmiTagMask", true)                                                        \
	X(smi_tag_size, "SmiValueShift", true)                                                     \
	X(smi_shift_size, "SmiShiftSize", true)                                                    \
	X(fp_function, "off_fp_function", true)                                                    \
	X(fp_context, "off_fp_context", true)                                                      \
	X(fp_marker, "off_fp_context_or_frame_type", true)                                         \
	X(fp_bytecode_array, "off_fp_bytecode_array", true)                                        \
	X(fp_bytecode_offset, "off_fp_bytecode_offset", true)                                      \
	X(ft_entry, "frametype_EntryFrame", true)                                                  \
	X(ft_construct_entry, "frametype_ConstructEntryFrame", true)                               \
	X(ft_exit, "frametype_ExitFrame", true)                                                    \
	X(ft_builtin_exit, "frametype_BuiltinExitFrame", true)                                     \
	X(ft_stub, "frametype_StubFrame", true)                                                    \
	X(ft_internal, "frametype_InternalFrame", true)                                            \
	X(ft_construct, "frametype_ConstructFrame", true)                                          \
	X(ft_builtin, "frametype_BuiltinFrame", true)                                              \
	X(ft_interpreted, "frametype_InterpretedFrame", true)                                      \
	X(ft_baseline, "frametype_BaselineFrame", false)                                           \
	X(ft_maglev, "frametype_MaglevFrame", false)                                               \
	X(ft_turbofan, "frametype_TurbofanFrame", false)                                           \
	X(ft_native, "frametype_NativeFrame", false)                                               \
	X(map, "class_HeapObject__map__Map", true)                                                 \
	X(map_instance_type, "class_Map__instance_type__uint16_t", true)                           \
	X(fn_shared, "class_JSFunction__shared__SharedFunctionInfo", true)                         \
	X(sfi_name, "class_SharedFunctionInfo__name_or_scope_info__Object", true)                  \
	X(sfi_script, "class_SharedFunctionInfo__script_or_debug_info__HeapObject", true)          \
	X(sfi_function_data, "class_SharedFunctionInfo__function_data__Object", false)             \
	X(script_name, "class_Script__name__Object", true)                                         \
	X(script_line_ends, "class_Script__line_ends__Object", false)                              \
	X(string_length, "class_String__length__int32_t", true)                                    \
	X(seq_one_chars, "class_SeqOneByteString__chars__char", true)                              \
	X(seq_two_chars, "class_SeqTwoByteString__chars__char", true)                              \
	X(cons_first, "class_ConsString__first__String", true)                                     \
	X(cons_second, "class_ConsString__second__String", true)                                   \
	X(thin_actual, "class_ThinString__actual__String", false)                                  \
	X(first_nonstring_type, "FirstNonstringType", true)                                        \
	X(is_not_string_mask, "IsNotStringMask", true)                                             \
	X(string_encoding_mask, "StringEncodingMask", true)                                        \
	X(one_byte_string_tag, "OneByteStringTag", true)                                           \
	X(string_repr_mask, "StringRepresentationMask", true)                                      \
	X(seq_string_tag, "SeqStringTag", true)                                                    \
	X(cons_string_tag, "ConsStringTag", true)                                                  \
	X(thin_string_tag, "ThinStringTag", false)                                                 \
	X(type_js_function, "type_JSFunction__JS_FUNCTION_TYPE", true)                             \
	X(type_sfi, "type_SharedFunctionInfo__SHARED_FUNCTION_INFO_TYPE", true)                    \
	X(type_script, "type_Script__SCRIPT_TYPE", true)                                           \
	X(type_scope_info, "type_ScopeInfo__SCOPE_INFO_TYPE", false)                               \
	X(type_code, "type_Code__CODE_TYPE", false)                                                \
	X(script_source, "class_Script__source__Object", false)                                    \
	X(fixed_array_length, "class_FixedArrayBase__length__SMI", false)                          \
	X(type_fixed_array, "type_FixedArray__FIXED_ARRAY_TYPE", false)                            \
	X(scope_first_vars, "scopeinfo_idx_first_vars", false)                                     \
	X(scope_ncontextlocals, "scopeinfo_idx_ncontextlocals", false)

struct pf_v8_meta {
#define PF_V8_META_MEMBER(field, name, required) int32_t field;
	PF_V8_META_FIELDS(PF_V8_META_MEMBER)
#undef PF_V8_META_MEMBER
	/* a Smi's value is the word shifted right by smi_tag_size + smi_shift_size (V8 names
	 * the tag's width SmiValueShift) */
	/* bit i: constant i (in PF_V8_META_FIELDS order) was in the file */
	uint64_t present;
};

#define PF_V8_META_MISSING_LEN 96

/* Reads the constants of the ELF file open at fd. 0; -ENOTSUP when a required one is missing
 * or the layout is not the one the walk reads (64-bit words, 8-byte tagged values, slots
 * below the frame pointer), its name then in missing (may be NULL); -EINVAL for a file that
 * is no ELF. */
int pf_v8_meta_read(int fd, struct pf_v8_meta *out, char *missing, unsigned missing_len);

/* The constant `name` (without "v8dbg_") of a read table: true and *v when it was present. */
bool pf_v8_meta_get(const struct pf_v8_meta *m, const char *name, int32_t *v);

#endif
