/* elf_read.c — see elf_read.h. */
#include "symbolize/elf_read.h"

#include <errno.h>
#include <gelf.h>
#include <libelf.h>
#include <string.h>

bool pf_elf_ready(void)
{
	static int ready = -1;
	if (ready < 0)
		ready = elf_version(EV_CURRENT) != EV_NONE;
	return ready;
}

static void hexify(const uint8_t *b, size_t n, char *out, size_t outlen)
{
	static const char hx[] = "0123456789abcdef";
	size_t j = 0;
	for (size_t i = 0; i < n && j + 2 < outlen; i++) {
		out[j++] = hx[b[i] >> 4];
		out[j++] = hx[b[i] & 15];
	}
	out[j] = 0;
}

/* Walks a raw note area; 0 when a GNU build id was found. */
int pf_elf_notes_build_id(const uint8_t *p, size_t len, char *hex, size_t hexlen)
{
	size_t off = 0;
	while (off + 12 <= len) {
		uint32_t namesz, descsz, type;
		memcpy(&namesz, p + off, 4);
		memcpy(&descsz, p + off + 4, 4);
		memcpy(&type, p + off + 8, 4);
		size_t name_off = off + 12;
		size_t desc_off = name_off + (((size_t)namesz + 3) & ~(size_t)3);
		size_t next = desc_off + (((size_t)descsz + 3) & ~(size_t)3);
		if (desc_off > len || next > len || next <= off)
			return -EINVAL;
		if (type == NT_GNU_BUILD_ID && namesz == 4 && !memcmp(p + name_off, "GNU", 4) &&
		    descsz > 0 && descsz <= 64) {
			hexify(p + desc_off, descsz, hex, hexlen);
			return 0;
		}
		off = next;
	}
	return -ENOENT;
}

int pf_elf_handle_build_id(Elf *elf, char *hex, size_t hexlen)
{
	size_t nphdr = 0;
	if (elf_getphdrnum(elf, &nphdr) == 0) {
		for (size_t i = 0; i < nphdr; i++) {
			GElf_Phdr ph;
			if (!gelf_getphdr(elf, (int)i, &ph) || ph.p_type != PT_NOTE)
				continue;
			Elf_Data *d = elf_getdata_rawchunk(elf, (int64_t)ph.p_offset, ph.p_filesz,
							   ELF_T_NHDR);
			if (d && d->d_buf &&
			    pf_elf_notes_build_id(d->d_buf, d->d_size, hex, hexlen) == 0)
				return 0;
		}
	}
	Elf_Scn *scn = NULL;
	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_NOTE)
			continue;
		Elf_Data *d = elf_rawdata(scn, NULL);
		if (d && d->d_buf && pf_elf_notes_build_id(d->d_buf, d->d_size, hex, hexlen) == 0)
			return 0;
	}
	return -ENOENT;
}

int pf_elf_build_id(int fd, char *hex, size_t hexlen)
{
	if (!pf_elf_ready() || hexlen < PF_BUILD_ID_HEX)
		return -EINVAL;
	Elf *elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (!elf)
		return -EINVAL;
	int rc = elf_kind(elf) == ELF_K_ELF ? pf_elf_handle_build_id(elf, hex, hexlen) : -EINVAL;
	elf_end(elf);
	return rc;
}

/* True when elf has DWARF sections (.debug_*, or the old compressed .zdebug_*). */
bool pf_elf_has_dwarf(Elf *elf)
{
	size_t shstrndx;
	if (elf_getshdrstrndx(elf, &shstrndx) < 0)
		return false;
	for (Elf_Scn *scn = NULL; (scn = elf_nextscn(elf, scn));) {
		GElf_Shdr sh;
		const char *name = gelf_getshdr(scn, &sh) && sh.sh_type != SHT_NOBITS
					   ? elf_strptr(elf, shstrndx, sh.sh_name)
					   : NULL;
		if (name && (!strncmp(name, ".debug_", 7) || !strncmp(name, ".zdebug_", 8)))
			return true;
	}
	return false;
}

Elf_Scn *pf_elf_section(Elf *elf, const char *name)
{
	size_t shstrndx;
	if (!elf || elf_getshdrstrndx(elf, &shstrndx) < 0)
		return NULL;
	for (Elf_Scn *scn = NULL; (scn = elf_nextscn(elf, scn));) {
		GElf_Shdr sh;
		const char *n = gelf_getshdr(scn, &sh) ? elf_strptr(elf, shstrndx, sh.sh_name) : NULL;
		if (n && !strcmp(n, name))
			return scn;
	}
	return NULL;
}
