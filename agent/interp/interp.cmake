# interp.cmake — interpreted languages' stacks, the user-space half, as the static library
# `agent_interp`. Included from agent/CMakeLists.txt; paths relative to this file.
#
#   python_proc.c       CPython in a process: version, _PyRuntime, eval loop ranges, offsets
#   python_code.c       code objects read from the process to names, a per-process LRU cache
#   python_linetable.c  CPython line tables (3.9 lnotab, 3.10 linetable, 3.11+ locations)
#   elf_syms.c          an ELF file's symbol sections and defined symbols, for the detections and
#                       the symbolizer
#   v8_meta.c           V8's postmortem constants (v8dbg_*) of a node executable or libnode
#   v8_proc.c           V8 in a mapped file: version, the embedded builtins span
#   v8_names.c          SharedFunctionInfo -> function name, script, line from a live process
#   hotspot_vm.c        HotSpot's VMStructs/VMTypes tables of a JVM to the layout of its objects
#   hotspot_proc.c      HotSpot in a mapped libjvm.so: its exported tables, read from the process
#   hotspot_code.c      a JVM's code cache (address -> CodeBlob) and methods (Method* -> names)
set(PF_INTERP_DIR ${CMAKE_CURRENT_LIST_DIR})

foreach(lib libelf libxxhash)
	string(TOUPPER "PF_${lib}" var)
	if(NOT TARGET PkgConfig::${var})
		pkg_check_modules(${var} REQUIRED IMPORTED_TARGET GLOBAL ${lib})
	endif()
endforeach()

add_library(agent_interp STATIC
	${PF_INTERP_DIR}/python_proc.c ${PF_INTERP_DIR}/python_code.c
	${PF_INTERP_DIR}/python_linetable.c ${PF_INTERP_DIR}/v8_meta.c
	${PF_INTERP_DIR}/elf_syms.c ${PF_INTERP_DIR}/v8_proc.c ${PF_INTERP_DIR}/v8_names.c
	${PF_INTERP_DIR}/hotspot_vm.c ${PF_INTERP_DIR}/hotspot_proc.c
	${PF_INTERP_DIR}/hotspot_code.c)
target_include_directories(agent_interp PUBLIC ${PF_INTERP_DIR})
target_link_libraries(agent_interp
	PUBLIC pf_common
	PRIVATE pf_warnings PkgConfig::PF_LIBELF PkgConfig::PF_LIBXXHASH)
