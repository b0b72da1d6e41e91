"""A throwaway PostgreSQL server for integration tests: initdb + pg_ctl in a temporary
directory, on a free loopback port, its unix socket in that directory, stopped and removed at
the end. Every wait is bounded (pg_ctl -w -t, subprocess timeouts).

The server binaries come from Debian's `postgresql` package (/usr/lib/postgresql/<ver>/bin,
the newest version found); tests skip with a clear message only where they are missing.
PostgreSQL refuses to run as root: as root, the server runs as the `postgres` user (or
`nobody`) through runuser, and the directory is chown'ed to it.
"""
import glob
import os
import pwd
import re
import shutil
import subprocess
import tempfile

from pfharness import free_port


def find_bindir():
    """The newest /usr/lib/postgresql/<ver>/bin holding initdb and pg_ctl, or None."""
    found = []
    for d in glob.glob("/usr/lib/postgresql/*/bin"):
        m = re.search(r"/postgresql/(\d+)(?:\.(\d+))?/bin$", d)
        if m and all(os.access(os.path.join(d, b), os.X_OK) for b in ("initdb", "pg_ctl")):
            found.append(((int(m.group(1)), int(m.group(2) or 0)), d))
    return max(found)[1] if found else None


def _run_as():
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        try:
            return pwd.getpwnam(name)
        except KeyError:
            continue
    raise RuntimeError("running as root, and neither a 'postgres' nor a 'nobody' user exists "
                       "to run the PostgreSQL server as")


class PgServer:
    """initdb + pg_ctl start; url for libpq; stop()/start() for outage tests; destroy()."""

    def __init__(self, bindir, fsync=False):
        self.bindir = bindir
        self.fsync = fsync  # tests: off (speed); benchmarks: on, like a real server
        self.user = _run_as()
        self.dir = tempfile.mkdtemp(prefix="pf-pg-")
        self.data = os.path.join(self.dir, "data")
        self.log = os.path.join(self.dir, "server.log")
        self.port = free_port()
        if self.user:
            os.chown(self.dir, self.user.pw_uid, self.user.pw_gid)
        self._run(["initdb", "-D", self.data, "-U", "profleet", "--auth=trust",
                   "--locale=C", "-E", "UTF8", "--no-sync"], timeout=120)
        self.start()

    @property
    def url(self):
        return "postgres://profleet@127.0.0.1:%d/postgres" % self.port

    def _run(self, args, timeout):
        cmd = [os.path.join(self.bindir, args[0])] + args[1:]
        if self.user:
            cmd = ["runuser", "-u", self.user.pw_name, "--"] + cmd
        r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           timeout=timeout, cwd=self.dir)
        if r.returncode != 0:
            raise RuntimeError("%s failed (%d): %s\n%s" % (args[0], r.returncode,
                                                          r.stdout.decode(errors="replace"),
                                                          self.server_log()))
        return r

    def createdb(self, name):
        """A new empty database; its libpq URL."""
        self._run(["createdb", "-h", "127.0.0.1", "-p", str(self.port), "-U", "profleet", name],
                  timeout=60)
        return "postgres://profleet@127.0.0.1:%d/%s" % (self.port, name)

    def query(self, sql):
        """Rows of one SQL statement run with psql, each a tuple of text columns."""
        r = subprocess.run([os.path.join(self.bindir, "psql"), "-h", "127.0.0.1", "-p",
                            str(self.port), "-U", "profleet", "-d", "postgres", "-XAtF", "\t",
                            "-c", sql], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           timeout=30)
        if r.returncode != 0:
            raise RuntimeError("psql failed (%d): %s" % (r.returncode,
                                                        r.stderr.decode(errors="replace")))
        return [tuple(l.split("\t")) for l in r.stdout.decode().splitlines() if l]

    def client_ports(self, pid):
        """Local TCP ports of process pid's connections to this server (from /proc)."""
        inodes = set()
        for fd in os.listdir("/proc/%d/fd" % pid):
            try:
                link = os.readlink("/proc/%d/fd/%s" % (pid, fd))
            except OSError:
                continue
            if link.startswith("socket:["):
                inodes.add(link[8:-1])
        ports = set()
        for table in ("/proc/net/tcp", "/proc/net/tcp6"):
            with open(table) as f:
                for line in f.readlines()[1:]:
                    col = line.split()
                    if (col[9] in inodes and
                            int(col[2].rsplit(":", 1)[1], 16) == self.port):
                        ports.add(int(col[1].rsplit(":", 1)[1], 16))
        return ports

    def server_log(self):
        try:
            with open(self.log, errors="replace") as f:
                return f.read()[-4000:]
        except OSError:
            return ""

    def start(self):
        opts = ("-p %d -k %s -c listen_addresses=127.0.0.1 -c fsync=%s "
                "-c max_connections=60" % (self.port, self.dir, "on" if self.fsync else "off"))
        self._run(["pg_ctl", "-D", self.data, "-o", opts, "-l", self.log, "-w", "-t", "30",
                   "start"], timeout=60)

    def stop(self, mode="fast"):
        self._run(["pg_ctl", "-D", self.data, "-m", mode, "-w", "-t", "30", "stop"],
                  timeout=60)

    def destroy(self):
        try:
            if os.path.exists(os.path.join(self.data, "postmaster.pid")):
                self.stop("immediate")
        except Exception:  # still remove the directory
            pass
        shutil.rmtree(self.dir, ignore_errors=True)
