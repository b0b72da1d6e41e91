/* bootstrap.h — what the controller does once at start: make the data directory, create the
 * first admin and agent tokens in an empty store (only their SHA-256 hashes are stored; the
 * tokens go to DIR/admin.token and DIR/agent.token, mode 0600), load configs, assignments and
 * known agents from the store into the fleet, store the operator's default profiling config
 * (--default-config) when the store has none, and raise the open-files limit. */
#ifndef PF_BOOTSTRAP_H
#define PF_BOOTSTRAP_H

#include <stddef.h>

#include "pf/error.h"

struct pf_store;
struct pf_fleet;

/* Creates dir (0700) if missing and writes the database path into dbpath. */
int pf_bootstrap_data_dir(const char *dir, char *dbpath, size_t len, struct pf_error *err);
/* A token made outside the controller (a Kubernetes Secret mounted as a file): the file's text
 * without surrounding whitespace, 16..4096 printable non-space bytes. Its SHA-256 is added to
 * the store with role ("admin" or "agent") unless already stored (then 0, nothing changes:
 * the role it was stored with stays). 1 when added. Call before pf_bootstrap_tokens(), which
 * then finds tokens and writes none. */
int pf_bootstrap_import_token(struct pf_store *st, const char *path, const char *role,
			      struct pf_error *err);
/* Tokens from a directory (a Kubernetes Secret mounted as one): every file whose name does
 * not start with '.' (symbolic links followed) is one token named after the file, holding
 * "ROLE:SECRET" (role admin, operator, viewer or agent; the secret as for
 * pf_bootstrap_import_token). A new secret is added; a changed secret for a name this
 * directory provided before replaces it; a token this directory provided whose file is gone
 * is revoked (created_by "token-file-dir" marks them). Returns the number of files read. */
int pf_bootstrap_import_token_dir(struct pf_store *st, const char *dir, struct pf_error *err);
/* When the store holds no token: creates one admin and one agent token. */
int pf_bootstrap_tokens(struct pf_store *st, const char *dir, struct pf_error *err);
/* Reads the profiling config at path (at most PF_PROFCFG_MAX_DOC bytes) and validates it;
 * an unreadable or invalid file is an error whose path is the key path inside the document.
 * When the store has no config named "default", stores the file as its version 1 and returns
 * 1; when "default" exists (any version, any content), leaves it alone and returns 0. Call it
 * before pf_bootstrap_load_fleet(), which loads the stored version into the fleet. */
int pf_bootstrap_default_config(struct pf_store *st, const char *path, struct pf_error *err);
int pf_bootstrap_load_fleet(struct pf_store *st, struct pf_fleet *f, struct pf_error *err);
/* Soft RLIMIT_NOFILE := hard limit. Returns the new soft limit. */
long pf_raise_nofile_limit(void);

#endif
