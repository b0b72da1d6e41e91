/* fuzz_hotspot_vm.c — HotSpot's VM tables (agent/interp/hotspot_vm.h): their input is a JVM's
 * memory. The first 4 bytes are the VMTypes table's offset in the rest, which is the memory
 * from FUZZ_MEM_BASE on (the reader answers -EFAULT outside it); the VMStructs table is at BASE.
 * The entry layout is JDK 17's.
 *
 * Invariants checked:
 *  - parsing returns only 0, -ENOTSUP, -EINVAL, -E2BIG or -EFAULT;
 *  - a refused table leaves the result all zero; -ENOTSUP names the missing item (non-empty,
 *    NUL-terminated inside its buffer);
 *  - an accepted one has every required item;
 *  - parsing again gives the same result. */
#include <errno.h>
#include <string.h>

#include "fuzz.h"
#include "hotspot_vm.h"

static int read_mem(void *ctx, uint64_t addr, void *buf, size_t len)
{
	return fuzz_mem_read(ctx, addr, buf, len);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint32_t types;
	struct fuzz_mem m;
	if (!fuzz_mem_split(data, size, &types, sizeof(types), &m))
		return 0;
	struct pf_hs_layout l = PF_HS_LAYOUT_JDK17(FUZZ_MEM_BASE, FUZZ_MEM_BASE + types);
	struct pf_hs_vm vm, again;
	char missing[PF_HS_MISSING_LEN];
	memset(missing, 'x', sizeof(missing));
	int rc = pf_hs_vm_parse(&l, read_mem, &m, &vm, missing, sizeof(missing));
	FUZZ_CHECK(rc == 0 || rc == -ENOTSUP || rc == -EINVAL || rc == -E2BIG || rc == -EFAULT,
		   "rc %d", rc);
	if (rc < 0) {
		static const struct pf_hs_vm zero;
		FUZZ_CHECK(!memcmp(&vm, &zero, sizeof(vm)), "a refused table left values");
	}
	if (rc == -ENOTSUP)
		FUZZ_CHECK(missing[0] && memchr(missing, 0, sizeof(missing)), "missing not named");
	if (rc == 0) {
		FUZZ_CHECK(vm.present & 1ull, "CodeCache::_heaps not present");
	}
	int rc2 = pf_hs_vm_parse(&l, read_mem, &m, &again, NULL, 0);
	FUZZ_CHECK(rc2 == rc && !memcmp(&vm, &again, sizeof(vm)), "parse not deterministic");
	return 0;
}
