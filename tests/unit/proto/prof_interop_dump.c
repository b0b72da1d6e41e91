/* prof_interop_dump — writes the fixture window (tests/lib/prof_fixture.h, with timestamps and
 * a trace link) as OTLP (`otlp FILE`) or gzip'd pprof (`pprof FILE`) for interop_prof.sh. */
#include <stdio.h>
#include <string.h>

#include "otlp_profiles.h"
#include "pprof_codec.h"
#include "prof_fixture.h"

int main(int argc, char **argv)
{
	if (argc != 3)
		return 2;
	struct pf_prof_window *w = prof_fixture_window(PROF_FIX_TIMESTAMPS | PROF_FIX_LINK);
	struct pf_buf b;
	pf_buf_init(&b, 1 << 20);
	int r = strcmp(argv[1], "otlp") == 0 ? pf_otlp_profiles_encode(w, &b, NULL, NULL)
					     : pf_pprof_encode(w, -1, &b, NULL);
	pf_prof_window_free(w);
	FILE *f = r == 0 ? fopen(argv[2], "wb") : NULL;
	if (!f || fwrite(b.data, 1, b.len, f) != b.len || fclose(f) != 0) {
		fprintf(stderr, "prof_interop_dump: failed (%d)\n", r);
		return 1;
	}
	pf_buf_release(&b);
	return 0;
}
