/* bootstrap.h — what the controller does once at start: make the data directory, create the
 * first admin and agent tokens in an empty store (only their SHA-256 hashes are stored; the
 * tokens go to DIR/admin.token and DIR/agent.token, mode 0600), load configs, assignments and
 * known agents from the store into the fleet, and raise the open-files limit. */
#ifndef PF_BOOTSTRAP_H
#define PF_BOOTSTRAP_H

#include <stddef.h>

#include "pf/error.h"

struct pf_store;
struct pf_fleet;

/* Creates dir (0700) if missing and writes the database path into dbpath. */
int pf_bootstrap_data_dir(const char *dir, char *dbpath, size_t len, struct pf_error *err);
/* When the store holds no token: creates one admin and one agent token. */
int pf_bootstrap_tokens(struct pf_store *st, const char *dir, struct pf_error *err);
int pf_bootstrap_load_fleet(struct pf_store *st, struct pf_fleet *f, struct pf_error *err);
/* Soft RLIMIT_NOFILE := hard limit. Returns the new soft limit. */
long pf_raise_nofile_limit(void);

#endif
