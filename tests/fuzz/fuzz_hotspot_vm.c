/* fuzz_hotspot_vm.c — HotSpot's VM tables (agent/interp/hotspot_vm.h): their input is a JVM's
 * memory. The first 4 bytes are the VMTypes table's offset in the rest, which is the memory
 * from FUZZ_MEM_BASE on (the reader answers -EFAULT outside it); the VMStructs table is at BASE.
 * The entry layout is JDK 17's. With the offset's top bit set, the input is a whole process
 * instead (agent/interp/hotspot_proc.h): the exported variables are the 15 words at BASE (the
 * file loaded at bias 0), so the memory chooses the layout as well as the tables.
 *
 * Invariants checked:
 *  - parsing returns only 0, -ENOTSUP, -EINVAL, -E2BIG or -EFAULT;
 *  - a refused table leaves the result all zero; -ENOTSUP names the missing item (non-empty,
 *    NUL-terminated inside its buffer);
 *  - an accepted one has every required item;
 *  - parsing again gives the same result;
 *  - a process read returns only 0, -EAGAIN, -ENOTSUP or -EFAULT, names its reason on
 *    -ENOTSUP and leaves the result all zero when it fails;
 *  - then (the two words after the variables: an address and a Method*) a blob found holds
 *    the address, a method's names are NUL-terminated and empty when it fails, its line (at
 *    the address's low byte as bytecode index) answers only 0, -ENOENT, -EINVAL, -EFAULT;
 *  - and for a blob found, its scope descriptors: a PcDesc found lies inside the blob, its
 *    scopes are 1..PF_HS_SCOPES_MAX or an error of the documented ones. */
#include <errno.h>
#include <string.h>

#include "fuzz.h"
#include "hotspot_code.h"
#include "hotspot_proc.h"
#include "hotspot_vm.h"

static int read_mem(void *ctx, uint64_t addr, void *buf, size_t len)
{
	return fuzz_mem_read(ctx, addr, buf, len);
}

static const struct pf_hs_vm zero;

static void fuzz_proc(struct fuzz_mem *m)
{
	struct pf_hs_file f;
	uint64_t *v = (uint64_t *)&f;
	for (size_t k = 0; k < sizeof(f) / sizeof(*v); k++)
		v[k] = FUZZ_MEM_BASE + 8 * k;
	struct pf_hs_vm vm;
	char why[128];
	memset(why, 'x', sizeof(why));
	int rc = pf_hs_proc_read(&f, 0, read_mem, m, &vm, why, sizeof(why));
	FUZZ_CHECK(rc == 0 || rc == -EAGAIN || rc == -ENOTSUP || rc == -EFAULT, "proc rc %d", rc);
	if (rc == -ENOTSUP)
		FUZZ_CHECK(why[0] && memchr(why, 0, sizeof(why)), "reason not named");
	if (rc < 0) {
		FUZZ_CHECK(!memcmp(&vm, &zero, sizeof(vm)), "a refused process left values");
		return;
	}
	/* the code cache and methods (hotspot_code.h): the address and the Method* looked up
	 * are the two words after the variables */
	uint64_t look[2];
	if (fuzz_mem_read(m, FUZZ_MEM_BASE + sizeof(f), look, sizeof(look)) < 0)
		return;
	/* what the kernel's walk is given: heaps sorted and disjoint, an interpreter range */
	struct pf_hs_heap h[PF_HS_HEAPS_MAX];
	rc = pf_hs_heaps(&vm, read_mem, m, h, PF_HS_HEAPS_MAX);
	FUZZ_CHECK((rc >= 0 && rc <= PF_HS_HEAPS_MAX) || rc == -EINVAL || rc == -ENOTSUP ||
		       rc == -EFAULT,
		   "heaps rc %d", rc);
	for (int i = 0; i < rc; i++)
		FUZZ_CHECK(h[i].lo < h[i].hi && h[i].log2_seg >= 4 && h[i].log2_seg <= 16 &&
			       (i == 0 || h[i].lo >= h[i - 1].hi),
			   "heap %d does not hold together", i);
	uint64_t ilo = 0, ihi = 0;
	rc = pf_hs_interp_range(&vm, read_mem, m, &ilo, &ihi);
	FUZZ_CHECK(rc == 0 || rc == -EAGAIN || rc == -EINVAL || rc == -ENOTSUP || rc == -EFAULT,
		   "interp rc %d", rc);
	if (rc == 0)
		FUZZ_CHECK(ilo < ihi && ihi - ilo <= (1u << 30), "interpreter range");
	struct pf_hs_blob b;
	rc = pf_hs_blob_find(&vm, read_mem, m, look[0], &b);
	FUZZ_CHECK(rc == 0 || rc == -ENOENT || rc == -EINVAL || rc == -EFAULT, "blob rc %d", rc);
	if (rc == 0)
		FUZZ_CHECK(memchr(b.name, 0, sizeof(b.name)) && look[0] >= b.start &&
			       look[0] - b.start < (uint64_t)b.size && b.size > 0,
			   "blob does not hold the address");
	struct pf_hs_method me;
	rc = pf_hs_method_name(&vm, read_mem, m, b.method ? b.method : look[1], &me);
	FUZZ_CHECK(rc == 0 || rc == -EINVAL || rc == -EFAULT, "method rc %d", rc);
	FUZZ_CHECK(memchr(me.klass, 0, sizeof(me.klass)) && memchr(me.name, 0, sizeof(me.name)) &&
		       memchr(me.sig, 0, sizeof(me.sig)) && memchr(me.file, 0, sizeof(me.file)),
		   "a name not terminated");
	if (rc < 0)
		FUZZ_CHECK(!me.klass[0] && !me.name[0] && !me.sig[0], "a failed name left text");
	uint32_t line;
	rc = pf_hs_method_line(&vm, read_mem, m, b.method ? b.method : look[1],
			       (int32_t)(look[0] & 0xff), &line);
	FUZZ_CHECK(rc == 0 || rc == -ENOENT || rc == -EINVAL || rc == -EFAULT, "line rc %d", rc);
	if (!b.size)
		return;
	uint64_t pcdesc = 0;
	rc = pf_hs_pcdesc_find(&vm, read_mem, m, &b, look[0], &pcdesc);
	FUZZ_CHECK(rc == 0 || rc == -ENOENT || rc == -ENOTSUP || rc == -EINVAL || rc == -EFAULT,
		   "pcdesc rc %d", rc);
	if (rc < 0)
		return;
	FUZZ_CHECK(pcdesc >= b.start && pcdesc < b.start + (uint64_t)b.size, "PcDesc not in blob");
	struct pf_hs_scope sc[PF_HS_SCOPES_MAX];
	rc = pf_hs_scopes_at(&vm, read_mem, m, &b, pcdesc, sc, PF_HS_SCOPES_MAX);
	FUZZ_CHECK((rc >= 1 && rc <= PF_HS_SCOPES_MAX) || rc == -ENOENT || rc == -ENOTSUP ||
		       rc == -EINVAL || rc == -EFAULT,
		   "scopes rc %d", rc);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint32_t types;
	struct fuzz_mem m;
	if (!fuzz_mem_split(data, size, &types, sizeof(types), &m))
		return 0;
	if (types & 0x80000000u) {
		fuzz_proc(&m);
		return 0;
	}
	struct pf_hs_layout l = PF_HS_LAYOUT_JDK17(FUZZ_MEM_BASE, FUZZ_MEM_BASE + types);
	struct pf_hs_vm vm, again;
	char missing[PF_HS_MISSING_LEN];
	memset(missing, 'x', sizeof(missing));
	int rc = pf_hs_vm_parse(&l, read_mem, &m, &vm, missing, sizeof(missing));
	FUZZ_CHECK(rc == 0 || rc == -ENOTSUP || rc == -EINVAL || rc == -E2BIG || rc == -EFAULT,
		   "rc %d", rc);
	if (rc < 0) {
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
