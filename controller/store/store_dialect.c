/* store_dialect.c — the SQL dialect differences between the store's two backends, as plain
 * text functions (no database needed; tests/unit/controller/store/test_store_dialect.c). */
#include "store_dialect.h"

#include <ctype.h>
#include <errno.h>
#include <string.h>
#include <strings.h>

int store_sql_to_pg(const char *in, char *out, size_t cap)
{
	size_t o = 0;
	char quote = 0;

	if (!in || !out || cap == 0)
		return -EINVAL;
	for (const char *p = in; *p; p++) {
		char c = *p;
		if (quote) {
			if (c == quote)
				quote = 0;
		} else if (c == '\'' || c == '"') {
			quote = c;
		} else if (c == '?' && isdigit((unsigned char)p[1])) {
			c = '$'; /* ?N -> $N: the digits follow unchanged */
		} else if (c == '?') {
			return -EINVAL; /* an unnumbered ? has no PostgreSQL form */
		}
		if (o + 1 >= cap)
			return -ENOSPC;
		out[o++] = c;
	}
	if (quote)
		return -EINVAL;
	out[o] = '\0';
	return (int)o;
}

/* Words that only SQLite understands (case-insensitive, whole words). */
static const char *const sqlite_only[] = {
    "STRICT",	  "WITHOUT", "ROWID",	  "AUTOINCREMENT", "BLOB", "PRAGMA",
    "randomblob", "hex",     "IMMEDIATE", "REPLACE",	   "GLOB",
};

const char *store_sql_pg_unportable(const char *sql)
{
	static char word[32];
	const char *p = sql;

	while (p && *p) {
		if (*p == '\'') { /* skip string literals */
			const char *e = strchr(p + 1, '\'');
			p = e ? e + 1 : p + strlen(p);
			continue;
		}
		if (!isalpha((unsigned char)*p) && *p != '_') {
			p++;
			continue;
		}
		size_t n = 0;
		while (isalnum((unsigned char)p[n]) || p[n] == '_')
			n++;
		if (n < sizeof(word)) {
			memcpy(word, p, n);
			word[n] = '\0';
			for (size_t i = 0; i < sizeof(sqlite_only) / sizeof(sqlite_only[0]); i++)
				if (strcasecmp(word, sqlite_only[i]) == 0)
					return word;
		}
		p += n;
	}
	if (sql && strchr(sql, '?'))
		return "?";
	return NULL;
}
