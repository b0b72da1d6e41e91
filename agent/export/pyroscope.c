/* pyroscope.c — see pyroscope.h. */
#include "export/pyroscope.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <string.h>

static const char *const label_keys[] = {
    "host.name",       "process.executable.name", "container.id",	"service.namespace",
    "service.version", "service.instance.id",	  "k8s.namespace.name", "k8s.pod.name",
    "k8s.pod.uid",     "k8s.container.name",	  "k8s.node.name",
};

static const char *attr(const struct pf_prof_process *p, const char *key)
{
	for (size_t i = 0; i < p->n_attrs; i++)
		if (p->attrs[i].key && !strcmp(p->attrs[i].key, key))
			return p->attrs[i].value && *p->attrs[i].value ? p->attrs[i].value : NULL;
	return NULL;
}

/* Appends s with the name syntax's characters and controls replaced by '_'. */
static int put_clean(struct pf_buf *out, const char *s, bool key)
{
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		bool ok =
		    key ? ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
			   (c >= '0' && c <= '9') || c == '_')
			: !(c < 0x20 || c == 0x7f || c == '{' || c == '}' || c == ',' || c == '=');
		int r = pf_buf_putc(out, ok ? c : '_');
		if (r < 0)
			return r;
	}
	return 0;
}

int agent_pyroscope_app_name(const struct pf_prof_window *w, const struct pf_prof_process *p,
			     struct pf_buf *out)
{
	const char *svc = attr(p, "service.name");
	const char *exe = attr(p, "process.executable.name");
	int r;
	if (svc) {
		r = put_clean(out, svc, false);
	} else {
		r = pf_buf_append_str(out, "unknown_service");
		if (r == 0 && exe)
			r = pf_buf_putc(out, ':') ?: put_clean(out, exe, false);
	}
	if (r == 0)
		r = pf_buf_putc(out, '{');
	bool first = true;
	for (size_t i = 0; r == 0 && i < sizeof(label_keys) / sizeof(label_keys[0]); i++) {
		const char *v = attr(p, label_keys[i]);
		if (!v && !strcmp(label_keys[i], "host.name") && w->host_name && *w->host_name)
			v = w->host_name;
		if (!v)
			continue;
		if (!first)
			r = pf_buf_putc(out, ',');
		first = false;
		if (r == 0)
			r = put_clean(out, label_keys[i], true);
		if (r == 0)
			r = pf_buf_putc(out, '=');
		if (r == 0)
			r = put_clean(out, v, false);
	}
	return r ?: pf_buf_putc(out, '}');
}

/* RFC 3986 §2.3: unreserved characters stay, everything else is %XX. */
static int put_pct(struct pf_buf *out, const uint8_t *s, size_t n)
{
	static const char hex[] = "0123456789ABCDEF";
	for (size_t i = 0; i < n; i++) {
		uint8_t c = s[i];
		int r;
		if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		    c == '-' || c == '.' || c == '_' || c == '~') {
			r = pf_buf_putc(out, c);
		} else {
			char e[3] = {'%', hex[c >> 4], hex[c & 15]};
			r = pf_buf_append(out, e, 3);
		}
		if (r < 0)
			return r;
	}
	return 0;
}

int agent_pyroscope_target(const char *base_path, const struct pf_prof_window *w,
			   const struct pf_prof_process *p, struct pf_buf *out)
{
	struct pf_buf name;
	pf_buf_init(&name, 64 << 10);
	int r = agent_pyroscope_app_name(w, p, &name);
	if (r == 0)
		r = pf_buf_printf(out, "%s/ingest?format=pprof&name=", base_path ? base_path : "");
	if (r == 0)
		r = put_pct(out, name.data, name.len);
	if (r == 0)
		r = pf_buf_printf(out, "&from=%" PRIu64 "&until=%" PRIu64,
				  w->start_unix_ns / 1000000000u,
				  (w->end_unix_ns + 999999999u) / 1000000000u);
	pf_buf_release(&name);
	return r;
}
