/* interp_unwind.h — what the sampler's interpreter walkers (python_unwind.h, v8_unwind.h)
 * share: the on/off switch of a walker and the list of processes it does not walk.
 *
 * Every walker follows one protocol with the sampler, its only caller (one thread):
 *   _seen    a process is looked at once and, when it runs a supported interpreter, gets the
 *            kernel entry the BPF walk reads;
 *   _note    the user words of each drained sample: the interpreter frames to name;
 *   _tick    once per poll: renews the walker's per-poll budget;
 *   _name    fills a window's frames of the walker's kind, from names read while the process
 *            lived;
 *   _closed  after a window's processes: drops names no longer used;
 *   _forget  a process exec'ed or is gone;
 *   _enable  off forgets every process (the sampler empties the kernel's map of them).
 *
 * struct pf_interp_unwind is embedded by each walker as its first member; it owns no memory.
 * The calls the sampler makes on every walker alike (_tick, _forget, _name, _closed, _enable)
 * are in one table per walker (struct pf_interp_walker), so that it drives them in a loop;
 * _seen, _note and the statistics differ per walker and stay typed.
 *
 * struct pf_interp_procs is a walker's processes by pid: its per-process state embeds
 * struct pf_interp_proc as its first member (the table owns no memory either).
 * struct pf_interp_names is a process's names by frame word (the walker's word for a frame),
 * an open-addressing table that owns its names' strings. */
#ifndef PF_AGENT_INTERP_UNWIND_H
#define PF_AGENT_INTERP_UNWIND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pf/compiler.h"
#include "pf/profile.h"

#define PF_INTERP_UNSUPPORTED_KEPT 8 /* unsupported processes listed in a walker's status */
#define PF_INTERP_MSG_LEN 144	     /* "pid N: " and the reason */

struct pf_interp_unwind {
	bool on;
	/* the last PF_INTERP_UNSUPPORTED_KEPT reasons, a ring: next is where the next one goes */
	char unsup[PF_INTERP_UNSUPPORTED_KEPT][PF_INTERP_MSG_LEN];
	unsigned n_unsup, next_unsup;
};

#define PF_INTERP_PROC_BUCKETS 256

struct pf_interp_proc {
	struct pf_interp_proc *next;
	uint32_t pid;
};

struct pf_interp_procs {
	struct pf_interp_proc *b[PF_INTERP_PROC_BUCKETS];
};

/* pid's entry, NULL when it has none. */
struct pf_interp_proc *pf_interp_procs_get(const struct pf_interp_procs *t, uint32_t pid);
/* Links p (p->pid set, no entry of that pid yet). */
void pf_interp_procs_add(struct pf_interp_procs *t, struct pf_interp_proc *p);
/* Unlinks pid's entry and returns it (the caller frees it), NULL when it has none. */
struct pf_interp_proc *pf_interp_procs_take(struct pf_interp_procs *t, uint32_t pid);
/* Unlinks any entry and returns it, NULL when the table is empty. */
struct pf_interp_proc *pf_interp_procs_pop(struct pf_interp_procs *t);
/* Unlinks pid's entry, if it has one, and frees it with free_fn. */
void pf_interp_procs_drop(struct pf_interp_procs *t, uint32_t pid,
			  void (*free_fn)(struct pf_interp_proc *));
/* Unlinks every entry and frees each with free_fn. */
void pf_interp_procs_clear(struct pf_interp_procs *t, void (*free_fn)(struct pf_interp_proc *));

/* One name: function NULL when the word could not be named (done) or was not looked at yet
 * (!done); file, system_name NULL when none. */
struct pf_interp_name {
	uint64_t word; /* 0: empty slot */
	char *function, *file, *system_name;
	uint32_t line;
	uint32_t n_inlined;		/* functions inlined at the frame, innermost first */
	struct pf_prof_inline *inlined; /* (pf_prof_frame's); its strings owned too */
	bool done;
	uint64_t used_ms;
};

struct pf_interp_names {
	struct pf_interp_name *tab; /* power of two, at most half full */
	size_t n, cap;
	size_t bytes; /* of the strings */
};

/* word's entry, added (not named) when new; NULL when max entries are held or out of memory. */
struct pf_interp_name *pf_interp_names_entry(struct pf_interp_names *t, uint64_t word, size_t max);
/* Frees what e holds (its strings, its inlined functions), keeping its word, done and use. */
void pf_interp_name_reset(struct pf_interp_name *e);
/* Counts the strings the caller gave e in t's bytes. */
void pf_interp_names_named(struct pf_interp_names *t, const struct pf_interp_name *e);
/* Drops the entries not used since now - keep_ms. */
void pf_interp_names_expire(struct pf_interp_names *t, uint64_t now, uint64_t keep_ms);
/* Frees every entry. */
void pf_interp_names_clear(struct pf_interp_names *t);
/* The memory t holds: its strings and table. */
size_t pf_interp_names_bytes(const struct pf_interp_names *t);
/* Names the frames of kind among frames[0, n) from t (NULL: the process has none; they are
 * left unnamed): each one's mapping -1 (its address is the walker's word), its entry (at most
 * max in t) named by resolve(ctx, e) when it was not yet, marked used at now. 0 or -ENOMEM. */
int pf_interp_names_fill(struct pf_interp_names *t, size_t max, uint8_t kind, uint64_t now,
			 struct pf_prof_window *w, struct pf_prof_frame *frames, size_t n,
			 void (*resolve)(void *ctx, struct pf_interp_name *e), void *ctx);
/* Names frame f as e says (function, file, line, system name), copied into w's memory. 0 or
 * -ENOMEM. */
int pf_interp_name_frame(struct pf_prof_window *w, struct pf_prof_frame *f,
			 const struct pf_interp_name *e);

/* On, with no reasons kept. */
void pf_interp_unwind_init(struct pf_interp_unwind *b);
/* Sets the switch; true when the walker was on and is off now (it then forgets every process). */
bool pf_interp_unwind_switch(struct pf_interp_unwind *b, bool on);
/* Keeps one reason (formatted, cut at PF_INTERP_MSG_LEN - 1 bytes), the oldest going first. */
void pf_interp_unwind_unsupported(struct pf_interp_unwind *b, const char *fmt, ...) PF_PRINTF(2, 3);
/* The kept reasons, oldest first, into out; returns how many. */
unsigned pf_interp_unwind_reasons(const struct pf_interp_unwind *b,
				  char out[PF_INTERP_UNSUPPORTED_KEPT][PF_INTERP_MSG_LEN]);

/* One walker's calls (see above); w is the walker, whose first member is its
 * struct pf_interp_unwind. */
struct pf_interp_walker {
	/* once per poll: renews the walker's per-poll budget */
	void (*tick)(void *w);
	/* pid exec'ed or its samples are gone: its state goes */
	void (*forget)(void *w, uint32_t pid);
	/* names the frames of the walker's kind among frames[0, n) of pid, allocating from win;
	 * a frame that cannot be named keeps function NULL. 0 or -ENOMEM. */
	int (*name)(void *w, uint32_t pid, struct pf_prof_window *win, struct pf_prof_frame *frames,
		    size_t n);
	/* after a window's processes: drops names no longer used */
	void (*closed)(void *w);
	/* every process goes (the walker was switched off) */
	void (*forget_all)(void *w);
};

/* Whether walker w is on (true, the default). */
bool pf_interp_walker_enabled(const void *w);
/* On or off; off forgets every process. True when w was on and is off now: the caller then
 * clears the kernel's map of its processes. */
bool pf_interp_walker_enable(const struct pf_interp_walker *ops, void *w, bool on);

/* A named frame of w: function, file (NULL: none) and line copied into w's memory. 0 or
 * -ENOMEM. */
int pf_interp_frame_name(struct pf_prof_window *w, struct pf_prof_frame *f, const char *function,
			 const char *file, uint32_t line);

#endif
