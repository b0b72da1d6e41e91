/* cmds.c — see cmds.h. */
#include "cmds.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <curl/curl.h>

#include "pf/compiler.h"

const struct ctl_opt ctl_global_opts[] = {
    {"server", 0, CTL_OPT_STR, "URL", "controller base URL (env PROFLEET_SERVER)"},
    {"token", 0, CTL_OPT_STR, "TOKEN", "API bearer token (env PROFLEET_TOKEN)"},
    {"token-file", 0, CTL_OPT_STR, "FILE", "read the token from the first line of FILE"},
    {"config", 0, CTL_OPT_STR, "FILE",
     "config file (env PROFLEET_CONFIG; default ~/.config/profleet/ctl.yaml)"},
    {"ca-file", 0, CTL_OPT_STR, "FILE", "PEM CA bundle to verify an https:// server"},
    {"insecure-skip-verify", 0, CTL_OPT_FLAG, NULL, "do not verify the server's certificate"},
    {"output", 0, CTL_OPT_STR, "table|json", "human tables (default) or the API's JSON"},
    {"help", 'h', CTL_OPT_FLAG, NULL, "show this help"},
    {NULL},
};

static const struct ctl_opt no_opts[] = {{NULL}};

static const struct ctl_opt agents_opts[] = {
    {"selector", 'l', CTL_OPT_STR, "S",
     "only agents whose attributes match (env=prod,team in (a,b))"},
    {"limit", 0, CTL_OPT_STR, "N", "at most N agents (1..10000, default 1000)"},
    {NULL},
};
static const struct ctl_opt config_get_opts[] = {
    {"version", 0, CTL_OPT_STR, "N", "that version instead of the latest"},
    {NULL},
};
static const struct ctl_opt assign_opts[] = {
    {"selector", 'l', CTL_OPT_STR, "S", "agents the assignment applies to (required)"},
    {"config", 'c', CTL_OPT_STR, "C", "config name to apply (required)"},
    {"priority", 'p', CTL_OPT_STR, "P", "-1000000..1000000, highest wins (default 0)"},
    {NULL},
};
static const struct ctl_opt capture_opts[] = {
    {"agents", 'a', CTL_OPT_STR, "S",
     "selector of the agents to capture on (required; \"\" = all)"},
    {"process", 0, CTL_OPT_LIST, "RULE", "key=value or key=~regexp; repeatable (any matches)"},
    {"duration", 'd', CTL_OPT_STR, "D", "how long to sample: 30s, 5m (required)"},
    {"frequency", 'f', CTL_OPT_STR, "HZ", "samples per second, 1..1000 (default 99)"},
    {"type", 't', CTL_OPT_STR, "T", "what to profile: cpu (default), off_cpu, wall or alloc"},
    {"trace-id", 0, CTL_OPT_STR, "HEX", "link every sample to this trace (32 hex digits)"},
    {"note", 0, CTL_OPT_STR, "TEXT", "free text kept with the capture"},
    {"wait", 'w', CTL_OPT_FLAG, NULL, "wait for the result, showing progress on stderr"},
    {"wait-timeout", 0, CTL_OPT_STR, "D", "give up waiting after D (default duration + 2m)"},
    {NULL},
};
static const struct ctl_opt captures_opts[] = {
    {"state", 0, CTL_OPT_STR, "STATE", "only captures in that state"},
    {"limit", 0, CTL_OPT_STR, "N", "at most N captures (1..1000)"},
    {"cursor", 0, CTL_OPT_STR, "ID", "the page after capture ID (as the last list said)"},
    {NULL},
};
static const struct ctl_opt profiles_opts[] = {
    {"service", 's', CTL_OPT_STR, "S", "service.name"},
    {"type", 0, CTL_OPT_STR, "T", "profile type: cpu, off_cpu, alloc_space, goroutine, ..."},
    {"agent", 0, CTL_OPT_STR, "UID", "profiles sent by that agent"},
    {"trace-id", 0, CTL_OPT_STR, "T", "profiles with a sample linked to that trace"},
    {"trigger", 0, CTL_OPT_STR, "T", "on_demand, high_cpu, slow_span, ..."},
    {"capture", 0, CTL_OPT_STR, "ID", "profiles of that capture"},
    {"namespace", 0, CTL_OPT_STR, "NS", "k8s.namespace.name (agents with pod attribution)"},
    {"pod", 0, CTL_OPT_STR, "POD", "k8s.pod.name"},
    {"container", 0, CTL_OPT_STR, "C", "k8s.container.name"},
    {"since", 0, CTL_OPT_STR, "D", "started within the last D (1h, 30m)"},
    {"limit", 0, CTL_OPT_STR, "N", "at most N (1..1000, default 100)"},
    {NULL},
};
static const struct ctl_opt pprof_opts[] = {
    {"out", 'o', CTL_OPT_STR, "FILE", "where to write (default profile-ID.pb.gz; - = stdout)"},
    {NULL},
};
static const struct ctl_opt top_opts[] = {
    {"service", 's', CTL_OPT_STR, "S", "service.name"},
    {"type", 0, CTL_OPT_STR, "T", "profile type (default cpu): off_cpu, alloc_space, ..."},
    {"capture", 0, CTL_OPT_STR, "ID", "the profiles of that capture (all of its time range)"},
    {"namespace", 0, CTL_OPT_STR, "NS", "k8s.namespace.name (agents with pod attribution)"},
    {"pod", 0, CTL_OPT_STR, "POD", "k8s.pod.name"},
    {"container", 0, CTL_OPT_STR, "C", "k8s.container.name"},
    {"since", 0, CTL_OPT_STR, "D", "over the last D (default 1h; with --capture: all)"},
    {"limit", 0, CTL_OPT_STR, "N", "at most N functions (1..1000, default 20)"},
    {NULL},
};

static const struct ctl_opt rollout_start_opts[] = {
    {"config", 0, CTL_OPT_STR, "NAME", "the config to roll out"},
    {"version", 0, CTL_OPT_STR, "N", "the version (default: the latest, e.g. staged with "
				       "PUT ?stage=1)"},
    {"selector", 0, CTL_OPT_STR, "S", "only the config's agents that match S"},
    {"initial", 0, CTL_OPT_STR, "N", "agents in the first batch (default 3)"},
    {"multiplier", 0, CTL_OPT_STR, "N", "each batch N times the last (default 5)"},
    {"max-batch-percent", 0, CTL_OPT_STR, "P", "cap on a batch, % of the agents (default 100)"},
    {"pause", 0, CTL_OPT_STR, "D", "between batches (default 5s)"},
    {"max-failure-percent", 0, CTL_OPT_STR, "P", "halt past this failure share (default 5)"},
    {"rollback", 0, CTL_OPT_FLAG, NULL, "on halt, send the moved agents back (default: halt)"},
    {NULL},
};
static const struct ctl_opt rollouts_opts[] = {
    {"active", 0, CTL_OPT_FLAG, NULL, "only running, paused, halted or rolling back"},
    {"limit", 0, CTL_OPT_STR, "N", "at most N (1..1000, default 100)"},
    {NULL},
};

static int cmd_completion(struct ctl_ctx *c);

static const struct ctl_cmd commands[] = {
    {NULL, "agents", "[--selector S]", "list agents", NULL, agents_opts, 0, 0, true,
     ctl_cmd_agents},
    {"config", "get", "NAME [--version N]", "print a config (its YAML; JSON with --output json)",
     NULL, config_get_opts, 1, 1, true, ctl_cmd_config_get},
    {"config", "set", "NAME FILE", "store FILE (- = stdin) as the next version of config NAME",
     "The server validates the document and refuses it with the key path of the first error.\n"
     "Storing the same body as the latest version changes nothing.",
     no_opts, 2, 2, true, ctl_cmd_config_set},
    {"config", "versions", "NAME", "list the versions of a config, newest first", NULL, no_opts, 1,
     1, true, ctl_cmd_config_versions},
    {"config", "validate", "FILE", "check a profiling config locally (no server needed)",
     "Uses the same schema as the controller and the agents; an error names the key path,\n"
     "e.g. profiling.sampling.frequency_hz: must be 1..1000, got 5000. Exit 0 when valid,\n"
     "2 when not.",
     no_opts, 1, 1, false, ctl_cmd_config_validate},
    {NULL, "assign", "NAME --selector S --config C [--priority P]",
     "apply config C to the agents matching S (creates or replaces assignment NAME)", NULL,
     assign_opts, 1, 1, true, ctl_cmd_assign},
    {NULL, "capture",
     "--agents S [--process key=value | key=~regexp]... --duration 30s [--frequency 99]\n"
     "                    [--type cpu|off_cpu|wall|alloc] [--trace-id HEX] [--note TEXT] [--wait]",
     "profile matching agents now, for a fixed duration",
     "Without --wait: prints the capture id and returns. With --wait: polls the capture,\n"
     "prints a line on stderr whenever an agent reports, then the profile ids and the flame\n"
     "graph URL <server>/ui/#/captures/ID (the console's capture page). Exit 0 when done, 3 when partial,\n"
     "4 when failed, 5 when cancelled, 1 on timeout. Ctrl-C while waiting cancels the\n"
     "capture (DELETE) and exits 130.",
     capture_opts, 0, 0, true, ctl_cmd_capture},
    {NULL, "captures", "[ID] [--state STATE] [--limit N] [--cursor ID]",
     "list captures, or show one with its per-agent states", NULL, captures_opts, 0, 1, true,
     ctl_cmd_captures},
    {NULL, "profiles",
     "[--service S] [--type T] [--agent UID] [--trace-id T] [--trigger T] [--capture ID]\n"
     "                    [--since 1h] [--namespace NS] [--pod POD] [--container C] [--limit N]",
     "list stored profiles, newest first", NULL, profiles_opts, 0, 0, true, ctl_cmd_profiles},
    {NULL, "pprof", "ID [-o FILE]", "download a profile as gzip'd pprof (go tool pprof reads it)",
     NULL, pprof_opts, 1, 1, true, ctl_cmd_pprof},
    {NULL, "top",
     "[--service S] [--type T] [--capture ID] [--namespace NS] [--pod POD] [--container C]\n"
     "                    [--since 1h] [--limit N]",
     "hottest functions (self and total) over the matching profiles", NULL, top_opts, 0, 0, true,
     ctl_cmd_top},
    {NULL, "rollouts", "[ID] [--active] [--limit N]",
     "list rollouts, or show one with its batches and errors", NULL, rollouts_opts, 0, 1, true,
     ctl_cmd_rollouts},
    {"rollout", "start", "--config NAME [--version N] [--selector S] [--initial N]\n"
     "                    [--multiplier N] [--pause 5s] [--max-failure-percent P] [--rollback]",
     "roll a config version out in batches (docs/rollouts.md)",
     "The version goes to one batch of the config's agents at a time; past\n"
     "--max-failure-percent failures in a batch the rollout halts (with --rollback the agents\n"
     "already moved go back to the version they had). Stage the version first with\n"
     "`curl -X PUT .../configs/NAME?stage=1` so that a plain set does not push it everywhere.",
     rollout_start_opts, 0, 0, true, ctl_cmd_rollout_start},
    {"rollout", "pause", "ID", "pause a running rollout (no batch starts)", NULL, no_opts, 1, 1,
     true, ctl_cmd_rollout_action},
    {"rollout", "resume", "ID", "resume a paused or halted rollout", NULL, no_opts, 1, 1, true,
     ctl_cmd_rollout_action},
    {"rollout", "rollback", "ID", "send the agents already moved back to their old version",
     NULL, no_opts, 1, 1, true, ctl_cmd_rollout_action},
    {"rollout", "cancel", "ID", "stop a rollout; moved agents keep the new version", NULL,
     no_opts, 1, 1, true, ctl_cmd_rollout_action},
    {NULL, "completion", "bash", "print a bash completion script",
     "Load it with: source <(profleetctl completion bash)", no_opts, 1, 1, false, cmd_completion},
};

static const char exit_help[] =
    "Exit status: 0 ok; 1 the server refused or could not be reached; 2 bad usage or invalid\n"
    "local input; capture --wait: 3 partial, 4 failed, 5 cancelled; 130 interrupted (the\n"
    "capture was cancelled).\n";

static bool takes_value(const struct ctl_opt *tab, const char *arg)
{
	if (arg[0] != '-' || strchr(arg, '='))
		return false;
	for (const struct ctl_opt *o = tab; o->name; o++)
		if (o->kind != CTL_OPT_FLAG &&
		    ((arg[1] == '-' && strcmp(arg + 2, o->name) == 0) ||
		     (o->short_name && arg[1] == o->short_name && arg[2] == '\0')))
			return true;
	return false;
}

/* Index of the next non-option word from i on, skipping global options and their values. */
static int next_word(int argc, char *const *argv, int i)
{
	for (; i < argc; i++) {
		if (strcmp(argv[i], "--") == 0)
			return i + 1 < argc ? i + 1 : -1;
		if (argv[i][0] != '-' || argv[i][1] == '\0')
			return i;
		if (takes_value(ctl_global_opts, argv[i]))
			i++;
	}
	return -1;
}

int ctl_cmd_parse(int argc, char *const *argv, const struct ctl_cmd **cmd, struct ctl_args *a,
		  struct pf_error *err)
{
	*cmd = NULL;
	*a = (struct ctl_args){0};
	int wi = next_word(argc, argv, 1);
	if (wi < 0 || strcmp(argv[wi], "help") == 0) {
		/* the overview, or `help CMD [SUB]` */
		if (wi >= 0 && wi + 1 < argc) {
			char *hargv[4] = {argv[0], argv[wi + 1], NULL, NULL};
			int hn = 2;
			if (wi + 2 < argc)
				hargv[hn++] = argv[wi + 2];
			hargv[hn++] = (char *)"--help";
			return ctl_cmd_parse(hn, hargv, cmd, a, err);
		}
		const struct ctl_opt *tabs[] = {ctl_global_opts, NULL};
		return ctl_args_parse(a, tabs, argc - 1, argv + 1, err);
	}
	const char *w = argv[wi];
	int si = -1;
	bool group = false;
	for (size_t i = 0; i < PF_ARRAY_SIZE(commands); i++)
		if (commands[i].group && strcmp(commands[i].group, w) == 0)
			group = true;
	if (group) {
		si = next_word(argc, argv, wi + 1);
		for (size_t i = 0; si >= 0 && i < PF_ARRAY_SIZE(commands); i++)
			if (commands[i].group && strcmp(commands[i].group, w) == 0 &&
			    strcmp(commands[i].name, argv[si]) == 0)
				*cmd = &commands[i];
		if (!*cmd && si < 0) {
			/* `config --help`: the overview lists the subcommands */
			const struct ctl_opt *tabs[] = {ctl_global_opts, NULL};
			int rc = ctl_args_parse(a, tabs, argc - 1, argv + 1, err);
			if (rc == 0 && ctl_args_flag(a, "help"))
				return 0;
			pf_error_clear(err);
			*a = (struct ctl_args){0};
		}
		if (!*cmd)
			return pf_error_set(err, -EINVAL, "",
					    "%s: expected one of get, set, versions, validate%s%s",
					    w, si >= 0 ? ", got " : "", si >= 0 ? argv[si] : "");
	} else {
		for (size_t i = 0; i < PF_ARRAY_SIZE(commands); i++)
			if (!commands[i].group && strcmp(commands[i].name, w) == 0)
				*cmd = &commands[i];
		if (!*cmd)
			return pf_error_set(err, -EINVAL, "", "unknown command \"%s\"", w);
	}
	/* the arguments without the command words */
	char **rest = calloc((size_t)argc, sizeof(*rest));
	if (!rest)
		return pf_error_set(err, -ENOMEM, "", "out of memory");
	int n = 0;
	for (int i = 1; i < argc; i++)
		if (i != wi && i != si)
			rest[n++] = argv[i];
	const struct ctl_opt *tabs[] = {(*cmd)->opts, ctl_global_opts, NULL};
	int rc = ctl_args_parse(a, tabs, n, rest, err);
	free(rest);
	if (rc < 0 || ctl_args_flag(a, "help"))
		return rc;
	if (a->n_pos < (*cmd)->min_pos || a->n_pos > (*cmd)->max_pos)
		return pf_error_set(err, -EINVAL, "", "usage: profleetctl %s%s%s %s",
				    (*cmd)->group ? (*cmd)->group : "", (*cmd)->group ? " " : "",
				    (*cmd)->name, (*cmd)->args_usage);
	return 0;
}

static void print_opts(FILE *f, const struct ctl_opt *tab)
{
	for (const struct ctl_opt *o = tab; o->name; o++) {
		char left[64], sh[8] = "    ";
		if (o->short_name)
			snprintf(sh, sizeof(sh), "-%c, ", o->short_name);
		snprintf(left, sizeof(left), "%s--%s%s%s", sh, o->name, o->metavar ? " " : "",
			 o->metavar ? o->metavar : "");
		fprintf(f, "  %-30s %s\n", left, o->help);
	}
}

void ctl_print_help(FILE *f, const struct ctl_cmd *cmd)
{
	if (!cmd) {
		fprintf(f,
			"profleetctl — the command-line client of the profleet controller's API\n\n"
			"Usage: profleetctl [global options] COMMAND [arguments]\n\nCommands:\n");
		for (size_t i = 0; i < PF_ARRAY_SIZE(commands); i++) {
			char name[32];
			snprintf(name, sizeof(name), "%s%s%s",
				 commands[i].group ? commands[i].group : "",
				 commands[i].group ? " " : "", commands[i].name);
			fprintf(f, "  %-18s %s\n", name, commands[i].summary);
		}
		fprintf(f, "\nGlobal options (before or after the command):\n");
		print_opts(f, ctl_global_opts);
		fprintf(
		    f,
		    "\nServer and token: flags, else PROFLEET_SERVER / PROFLEET_TOKEN, else the "
		    "config file\n(--config FILE or PROFLEET_CONFIG; for assign and rollout start, --config\nnames "
		    "the profiling "
		    "config;\nkeys server, token, ca_file, insecure_skip_verify; mode 0600 "
		    "when it holds a token),\nelse http://127.0.0.1:4320.\n\n%s"
		    "\n`profleetctl COMMAND --help` shows a command's options.\n",
		    exit_help);
		return;
	}
	fprintf(f, "Usage: profleetctl %s%s%s %s\n\n%s.\n", cmd->group ? cmd->group : "",
		cmd->group ? " " : "", cmd->name, cmd->args_usage, cmd->summary);
	if (cmd->details)
		fprintf(f, "\n%s\n", cmd->details);
	if (cmd->opts[0].name) {
		fprintf(f, "\nOptions:\n");
		print_opts(f, cmd->opts);
	}
	fprintf(f, "\nGlobal options:\n");
	print_opts(f, ctl_global_opts);
	fprintf(f, "\n%s", exit_help);
}

static void print_word_list(FILE *f, const struct ctl_opt *tab)
{
	for (const struct ctl_opt *o = tab; o->name; o++)
		fprintf(f, " --%s", o->name);
}

static void print_value_opts(FILE *f, const struct ctl_opt *tab)
{
	for (const struct ctl_opt *o = tab; o->name; o++) {
		if (o->kind == CTL_OPT_FLAG)
			continue;
		fprintf(f, " --%s", o->name);
		if (o->short_name)
			fprintf(f, " -%c", o->short_name);
	}
}

void ctl_print_completion_bash(FILE *f)
{
	fprintf(f,
		"# bash completion for profleetctl; load with: source <(profleetctl completion "
		"bash)\n_profleetctl() {\n"
		"\tlocal cur=\"${COMP_WORDS[COMP_CWORD]}\" prev=\"${COMP_WORDS[COMP_CWORD-1]}\"\n"
		"\tlocal cmd=\"\" sub=\"\" skip=\"\" i w\n\tlocal valopts=\"");
	print_value_opts(f, ctl_global_opts);
	for (size_t i = 0; i < PF_ARRAY_SIZE(commands); i++)
		print_value_opts(f, commands[i].opts);
	fprintf(
	    f, " \"\n"
	       "\tfor ((i = 1; i < COMP_CWORD; i++)); do\n"
	       "\t\tw=\"${COMP_WORDS[i]}\"\n"
	       "\t\tif [[ -n $skip ]]; then skip=\"\"; continue; fi\n"
	       "\t\tcase \"$w\" in\n"
	       "\t\t--*=*) ;;\n"
	       "\t\t-*) [[ $valopts == *\" $w \"* ]] && skip=1 ;;\n"
	       "\t\t*) if [[ -z $cmd ]]; then cmd=$w; elif [[ -z $sub ]]; then sub=$w; fi ;;\n"
	       "\t\tesac\n"
	       "\tdone\n"
	       "\tcase \"$prev\" in\n"
	       "\t--output) COMPREPLY=($(compgen -W \"table json\" -- \"$cur\")); return ;;\n"
	       "\t--config|--token-file|--ca-file|--out|-o) COMPREPLY=($(compgen -f -- \"$cur\")); "
	       "return ;;\n"
	       "\tesac\n"
	       "\tif [[ $valopts == *\" $prev \"* ]]; then return; fi\n"
	       "\tif [[ -z $cmd && $cur != -* ]]; then\n"
	       "\t\tCOMPREPLY=($(compgen -W \"");
	for (size_t i = 0; i < PF_ARRAY_SIZE(commands); i++)
		if (!commands[i].group || i == 0 || !commands[i - 1].group ||
		    strcmp(commands[i - 1].group, commands[i].group) != 0)
			fprintf(f, "%s%s", i ? " " : "",
				commands[i].group ? commands[i].group : commands[i].name);
	fprintf(f, " help\" -- \"$cur\")); return\n\tfi\n"
		   "\tlocal key=\"$cmd\" opts=\"\"\n"
		   "\tcase \"$cmd\" in\n");
	for (size_t i = 0; i < PF_ARRAY_SIZE(commands); i++) {
		if (!commands[i].group || (i && commands[i - 1].group &&
					   strcmp(commands[i - 1].group, commands[i].group) == 0))
			continue;
		fprintf(f,
			"\t%s)\n\t\tif [[ -z $sub && $cur != -* ]]; then\n"
			"\t\t\tCOMPREPLY=($(compgen -W \"",
			commands[i].group);
		for (size_t j = i; j < PF_ARRAY_SIZE(commands) && commands[j].group &&
				   strcmp(commands[j].group, commands[i].group) == 0;
		     j++)
			fprintf(f, "%s%s", j > i ? " " : "", commands[j].name);
		fprintf(f, "\" -- \"$cur\")); return\n\t\tfi\n\t\tkey=\"$cmd $sub\" ;;\n");
	}
	fprintf(f, "\tesac\n\tcase \"$key\" in\n");
	for (size_t i = 0; i < PF_ARRAY_SIZE(commands); i++) {
		fprintf(f, "\t\"%s%s%s\") opts=\"", commands[i].group ? commands[i].group : "",
			commands[i].group ? " " : "", commands[i].name);
		print_word_list(f, commands[i].opts);
		fprintf(f, "\" ;;\n");
	}
	fprintf(f, "\tcompletion) COMPREPLY=($(compgen -W \"bash\" -- \"$cur\")); return ;;\n"
		   "\tesac\n"
		   "\tif [[ $cur == -* ]]; then\n"
		   "\t\tCOMPREPLY=($(compgen -W \"$opts");
	print_word_list(f, ctl_global_opts);
	fprintf(f, "\" -- \"$cur\"))\n"
		   "\telse\n"
		   "\t\tCOMPREPLY=($(compgen -f -- \"$cur\"))\n"
		   "\tfi\n"
		   "}\n"
		   "complete -F _profleetctl profleetctl\n");
}

static int cmd_completion(struct ctl_ctx *c)
{
	if (strcmp(c->args->pos[0], "bash") != 0) {
		pf_error_set(c->error, -EINVAL, "",
			     "completion: only bash is supported, got \"%s\"", c->args->pos[0]);
		return CTL_EXIT_USAGE;
	}
	ctl_print_completion_bash(c->out);
	return CTL_EXIT_OK;
}

int ctl_fail(struct ctl_ctx *c, int rc)
{
	return rc == -EINTR && c->interrupted && *c->interrupted ? CTL_EXIT_INTERRUPTED
								 : CTL_EXIT_ERROR;
}

int ctl_call(struct ctl_ctx *c, const char *method, const struct pf_buf *path, json_t *body,
	     json_t **out)
{
	int rc = ctl_http_json(c->http, method, pf_buf_str(path), body, out, c->error);
	return rc < 0 ? ctl_fail(c, rc) : CTL_EXIT_OK;
}

int ctl_fetch(struct ctl_ctx *c, const struct pf_buf *path, json_t **r)
{
	int st = ctl_call(c, "GET", path, NULL, r);
	if (st != CTL_EXIT_OK || c->format != CTL_OUT_JSON)
		return st;
	st = ctl_emit_json(c, *r);
	json_decref(*r);
	*r = NULL;
	return st;
}

int ctl_query_opt(struct ctl_ctx *c, struct pf_buf *p, const char *key, const char *opt)
{
	if (ctl_query_add(p, key, ctl_args_str(c->args, opt)) < 0)
		return pf_error_set(c->error, -E2BIG, "", "--%s: too long", opt);
	return 0;
}

int ctl_query_limit(struct ctl_ctx *c, struct pf_buf *p, int64_t max)
{
	const char *limit = ctl_args_str(c->args, "limit");
	int64_t v;
	if (limit && ctl_parse_int("--limit", limit, 1, max, &v, c->error) < 0)
		return -EINVAL;
	return ctl_query_add(p, "limit", limit);
}

int ctl_table_done(struct ctl_ctx *c, struct ctl_table *t)
{
	if (!t) {
		pf_error_set(c->error, -ENOMEM, "", "out of memory");
		return CTL_EXIT_ERROR;
	}
	if (ctl_table_print(t, c->out) < 0) {
		pf_error_set(c->error, -EIO, "", "writing the output failed");
		return CTL_EXIT_ERROR;
	}
	return CTL_EXIT_OK;
}

int ctl_emit_json(struct ctl_ctx *c, const json_t *j)
{
	if (ctl_print_json(c->out, j) < 0) {
		pf_error_set(c->error, -EIO, "", "writing the output failed");
		return CTL_EXIT_ERROR;
	}
	return CTL_EXIT_OK;
}

int ctl_since_from_ms(struct ctl_ctx *c, char *buf, size_t n)
{
	const char *since = ctl_args_str(c->args, "since");
	buf[0] = '\0';
	if (!since)
		return 0;
	uint64_t s;
	int rc = ctl_parse_duration("--since", since, &s, c->error);
	if (rc < 0)
		return rc;
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	int64_t now_ms = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
	int64_t from = now_ms - (int64_t)s * 1000;
	snprintf(buf, n, "%" PRId64, from > 0 ? from : 0);
	return 0;
}

static bool cmd_has_opt(const struct ctl_cmd *cmd, const char *name)
{
	for (const struct ctl_opt *o = cmd->opts; o->name; o++)
		if (strcmp(o->name, name) == 0)
			return true;
	return false;
}

static volatile sig_atomic_t interrupted;

static void on_sigint(int sig)
{
	(void)sig;
	interrupted = 1;
}

static int run(int argc, char **argv, struct pf_error *err)
{
	const struct ctl_cmd *cmd;
	struct ctl_args a;
	if (ctl_cmd_parse(argc, argv, &cmd, &a, err) < 0) {
		fprintf(stderr, "profleetctl: %s\n(see profleetctl --help)\n", err->msg);
		pf_error_clear(err);
		return CTL_EXIT_USAGE;
	}
	if (!cmd || ctl_args_flag(&a, "help")) {
		ctl_print_help(stdout, cmd);
		return CTL_EXIT_OK;
	}
	struct ctl_ctx c = {
	    .cmd = cmd,
	    .args = &a,
	    .out = stdout,
	    .err = stderr,
	    .error = err,
	    .interrupted = &interrupted,
	    .poll_ms = 500,
	};
	const char *fmt = ctl_args_str(&a, "output");
	if (fmt && ctl_format_parse(fmt, &c.format) < 0) {
		pf_error_set(err, -EINVAL, "--output", "expected table or json, got \"%s\"", fmt);
		return CTL_EXIT_USAGE;
	}
	int status;
	if (cmd->needs_server) {
		const struct ctl_config_sources src = {
		    .server = ctl_args_str(&a, "server"),
		    .token = ctl_args_str(&a, "token"),
		    .token_file = ctl_args_str(&a, "token-file"),
		    /* assign's own --config names a profiling config, not this file */
		    .config_file = (!cmd_has_opt(cmd, "config") && ctl_args_str(&a, "config"))
				       ? ctl_args_str(&a, "config")
				       : getenv("PROFLEET_CONFIG"),
		    .ca_file = ctl_args_str(&a, "ca-file"),
		    .insecure = ctl_args_flag(&a, "insecure-skip-verify"),
		    .env_server = getenv("PROFLEET_SERVER"),
		    .env_token = getenv("PROFLEET_TOKEN"),
		    .env_xdg_config_home = getenv("XDG_CONFIG_HOME"),
		    .env_home = getenv("HOME"),
		};
		if (ctl_config_resolve(&src, &c.cfg, err) < 0)
			return CTL_EXIT_USAGE;
		const struct ctl_http_opts ho = {
		    .server = c.cfg.server,
		    .token = c.cfg.token,
		    .ca_file = c.cfg.ca_file,
		    .insecure = c.cfg.insecure_skip_verify,
		};
		c.http = ctl_http_new(&ho);
		if (!c.http) {
			pf_error_set(err, -errno, "", "cannot set up HTTP for %s: %s", c.cfg.server,
				     strerror(errno));
			ctl_config_release(&c.cfg);
			return CTL_EXIT_ERROR;
		}
		ctl_http_set_abort(c.http, &interrupted);
	}
	status = cmd->run(&c);
	ctl_http_free(c.http);
	ctl_config_release(&c.cfg);
	return status;
}

int ctl_main(int argc, char **argv)
{
	if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
		fprintf(stderr, "profleetctl: libcurl failed to initialize\n");
		return CTL_EXIT_ERROR;
	}
	/* Ctrl-C sets a flag that the HTTP transfer and the capture wait check; no SA_RESTART, so
	 * a sleep ends early. */
	struct sigaction sa = {.sa_handler = on_sigint};
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	struct pf_error err = {0};
	int status = run(argc, argv, &err);
	if (err.msg[0])
		fprintf(stderr, "profleetctl: %s\n", err.msg);
	if (fflush(stdout) != 0 && status == CTL_EXIT_OK) {
		fprintf(stderr, "profleetctl: writing the output failed: %s\n", strerror(errno));
		status = CTL_EXIT_ERROR;
	}
	curl_global_cleanup();
	return status;
}
