/* pywalk.h — the kernel's Python walk done from user space in the tests (python_offsets.h's
 * recipe over process_vm_readv), so a test checks the offsets against a live interpreter:
 * finds the thread whose thread_id is `ident` (threading.get_ident()) in the interpreter's
 * thread list, then names each frame of its chain with pf_py_names_resolve. */
#ifndef PF_TEST_PYWALK_H
#define PF_TEST_PYWALK_H

#include <stdint.h>

#include "python_code.h"
#include "python_proc.h"

#define PYWALK_MAX 32

struct pywalk_frame {
	uint64_t code;
	int32_t instr;
	struct pf_py_frame f;
};

/* Fills out[0, *n) leaf first. 0; -ENOENT when no thread has that ident; a read or resolve
 * error. */
int pywalk(const struct pf_py_process *p, struct pf_py_names *names, uint64_t ident,
	   struct pywalk_frame *out, unsigned *n);

#endif
