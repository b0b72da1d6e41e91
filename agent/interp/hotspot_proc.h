/* hotspot_proc.h — a HotSpot JVM (OpenJDK) in a mapped libjvm.so, read from the live process.
 *
 * Owns: deciding whether a mapped file is a libjvm.so whose self-description the agent reads
 * (its .dynsym exports gHotSpotVMStructs, gHotSpotVMTypes, gHotSpotVMIntConstants and the
 * entries' offset and stride variables), and reading those variables out of the running process: libjvm.so sets them
 * while the JVM starts (the file holds zeros), so the table layout is taken from the process's
 * memory and handed to pf_hs_vm_parse() (hotspot_vm.h), through the caller's reader.
 * Thread-safe (no state). */
#ifndef PF_AGENT_HOTSPOT_PROC_H
#define PF_AGENT_HOTSPOT_PROC_H

#include <stdbool.h>
#include <stdint.h>

#include "hotspot_vm.h"

/* The exported variables read, by (member, symbol, layout): the table pointers and the
 * entries' layouts (each an 8-byte value in the process); a layout value (1) is bounded by
 * PF_HS_LAYOUT_MAX, a table pointer (0) is not. */
#define PF_HS_SYMS(X)                                                                              \
	X(structs, "gHotSpotVMStructs", 0)                                                         \
	X(types, "gHotSpotVMTypes", 0)                                                             \
	X(s_stride, "gHotSpotVMStructEntryArrayStride", 1)                                         \
	X(s_type_name, "gHotSpotVMStructEntryTypeNameOffset", 1)                                   \
	X(s_field_name, "gHotSpotVMStructEntryFieldNameOffset", 1)                                 \
	X(s_is_static, "gHotSpotVMStructEntryIsStaticOffset", 1)                                   \
	X(s_offset, "gHotSpotVMStructEntryOffsetOffset", 1)                                        \
	X(s_address, "gHotSpotVMStructEntryAddressOffset", 1)                                      \
	X(t_stride, "gHotSpotVMTypeEntryArrayStride", 1)                                           \
	X(t_type_name, "gHotSpotVMTypeEntryTypeNameOffset", 1)                                     \
	X(t_size, "gHotSpotVMTypeEntrySizeOffset", 1)                                              \
	X(consts, "gHotSpotVMIntConstants", 0)                                                     \
	X(c_stride, "gHotSpotVMIntConstantEntryArrayStride", 1)                                    \
	X(c_name, "gHotSpotVMIntConstantEntryNameOffset", 1)                                       \
	X(c_value, "gHotSpotVMIntConstantEntryValueOffset", 1)

/* Where each variable is in the file (ELF virtual addresses). */
struct pf_hs_file {
#define PF_HS_SYM_MEMBER(m, ...) uint64_t m;
	PF_HS_SYMS(PF_HS_SYM_MEMBER)
#undef PF_HS_SYM_MEMBER
};

/* The largest entry stride or offset taken from a process: the JDKs' are below 64. */
#define PF_HS_LAYOUT_MAX 4096

/* True when the file name (a path's last part) is libjvm.so. */
bool pf_hs_file_name_ok(const char *path);

/* Reads the .dynsym of the ELF file open at fd. 0; -ENOTSUP with the first missing symbol
 * named in why (may be NULL) when it does not export every variable; -EINVAL for no ELF. */
int pf_hs_file_read(int fd, struct pf_hs_file *out, char *why, unsigned why_len);

/* Reads f's variables from the process (the file loaded at bias) through rd, then its tables.
 * 0 with *vm filled; -EAGAIN while the JVM has not set them yet (it is starting), -ENOTSUP
 * with the reason in why for a layout past PF_HS_LAYOUT_MAX or a table without what the walk
 * needs (pf_hs_vm_parse's -EINVAL and -E2BIG become -ENOTSUP too), or the reader's error. */
int pf_hs_proc_read(const struct pf_hs_file *f, uint64_t bias, pf_hs_read_fn rd, void *ctx,
		    struct pf_hs_vm *vm, char *why, unsigned why_len);

#endif
