/* profleetctl — the command-line client of the controller's REST API (docs/cli.md). The
 * program is ctl_main() in cmds.c, so the unit tests link the same code. */
#include "cmds.h"

int main(int argc, char **argv)
{
	return ctl_main(argc, argv);
}
