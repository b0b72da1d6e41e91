/* v8meta_fixture.c — a shared library exporting a few V8 postmortem constants the way a V8
 * build with pointer compression does (4-byte tagged values), for test_v8_meta: a file with
 * the metadata whose layout the walk cannot read. Not V8: values only. */
int v8dbg_TaggedSize = 4;
int v8dbg_SystemPointerSize = 8;
int v8dbg_HeapObjectTag = 1;
int v8dbg_HeapObjectTagMask = 3;
int v8dbg_SmiTag = 0;
int v8dbg_SmiTagMask = 1;
int v8dbg_SmiValueShift = 1;
int v8dbg_SmiShiftSize = 0;
int v8dbg_off_fp_function = -16;
