//! Throwaway PostgreSQL servers for tests that restart, kill or fail over a server:
//! a primary of its own (`initdb` on a free loopback port), a streaming standby of it
//! (`pg_basebackup -R`, asynchronous), promotion, and stops by pid. Every server is
//! killed (SIGKILL, its children too) and its directory removed when it is dropped, also
//! when a test panics.
//!
//! Standard library only, blocking calls (each returns when the server is ready, or
//! gone). From async code, call it inside `tokio::task::spawn_blocking` or accept the
//! short block (`pg_ctl -w` returns within a second or two on a small cluster).
//!
//! The server tools are looked up with `pg_config --bindir`, under
//! `/usr/lib/postgresql/*/bin` (newest first) and on `PATH`. PostgreSQL refuses to run
//! as root, so as root the tools run as the `postgres` OS user (`runuser -u postgres
//! --`, or `su` where runuser is missing), and the server's directory is handed to
//! that user.
//!
//! Settings chosen for speed and for short faults: `fsync = off` (a SIGKILL of the
//! server still keeps what it committed: the OS has it), `shared_buffers = 32MB`,
//! `wal_sender_timeout` and `wal_receiver_timeout` of 5 s, `wal_retrieve_retry_interval`
//! of 200 ms, trust authentication on loopback for users and replication.

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::thread::sleep;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// The directory holding `initdb`, `pg_ctl`, `pg_basebackup` and `psql`, if any.
pub fn bindir() -> Option<PathBuf> {
    let has_tools = |d: &Path| {
        ["initdb", "pg_ctl", "pg_basebackup", "psql"]
            .iter()
            .all(|t| d.join(t).is_file())
    };
    if let Ok(out) = Command::new("pg_config").arg("--bindir").output() {
        let d = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
        if out.status.success() && has_tools(&d) {
            return Some(d);
        }
    }
    let newest = fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let major: u32 = e.file_name().to_str()?.parse().ok()?;
            Some((major, e.path().join("bin")))
        })
        .filter(|(_, d)| has_tools(d))
        .max_by_key(|(major, _)| *major);
    if let Some((_, d)) = newest {
        return Some(d);
    }
    std::env::split_paths(&std::env::var_os("PATH")?).find(|d| has_tools(d))
}

/// The server tools, or `None` after saying why (a failure instead when
/// `TENURE_REQUIRE_STORES=1`, as in CI).
pub fn bindir_or_skip() -> Option<PathBuf> {
    let found = bindir();
    if found.is_none() {
        let why = "no PostgreSQL server tools (initdb, pg_ctl, pg_basebackup, psql) found \
                   via pg_config --bindir, /usr/lib/postgresql/*/bin or PATH";
        return crate::skip("the PostgreSQL server tools", why);
    }
    found
}

/// A port on 127.0.0.1 nobody listens on right now (bound, read, released).
pub fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("a free loopback port");
    l.local_addr().expect("a bound address").port()
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

fn fail(what: &str, out: &Output, log: &Path) -> io::Error {
    io::Error::other(format!(
        "{what} failed ({}):\n{}{}\nserver log {}:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
        log.display(),
        fs::read_to_string(log).unwrap_or_default(),
    ))
}

/// One throwaway server: its directory (data directory, log, unix socket), its port.
#[derive(Debug)]
pub struct PgServer {
    dir: PathBuf,
    bindir: PathBuf,
    as_postgres: bool,
    port: u16,
}

impl PgServer {
    fn empty(bindir: &Path, role: &str) -> io::Result<PgServer> {
        static N: AtomicU32 = AtomicU32::new(0);
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let dir = std::env::temp_dir().join(format!(
            "tenure-pg-{role}-{}-{nanos}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        fs::create_dir(&dir)?;
        // From here on Drop removes the directory, whatever happens.
        let server = PgServer {
            dir,
            bindir: bindir.to_owned(),
            as_postgres: is_root(),
            port: free_port(),
        };
        if server.as_postgres {
            let st = Command::new("chown")
                .arg("postgres:")
                .arg(&server.dir)
                .status()?;
            if !st.success() {
                return Err(io::Error::other(format!(
                    "chown postgres {}",
                    server.dir.display()
                )));
            }
        }
        Ok(server)
    }

    /// A fresh primary: `initdb`, configured for streaming replication, started.
    pub fn primary(bindir: &Path) -> io::Result<PgServer> {
        let server = PgServer::empty(bindir, "primary")?;
        let mut initdb = server.tool("initdb");
        initdb
            .arg("-D")
            .arg(server.data())
            .args(["-U", "postgres", "-A", "trust", "-E", "UTF8"])
            .args(["--locale=C", "--no-sync"]);
        server.run(initdb, "initdb")?;
        server.configure(
            "fsync = off\nfull_page_writes = off\nshared_buffers = 32MB\n\
             max_connections = 40\nwal_level = replica\nmax_wal_senders = 5\n\
             wal_keep_size = '256MB'\nwal_sender_timeout = '5s'\n\
             wal_receiver_timeout = '5s'\nwal_retrieve_retry_interval = '200ms'\n\
             hot_standby = on\nlog_min_messages = warning\n",
        )?;
        server.start()?;
        Ok(server)
    }

    /// A streaming standby of `primary` (asynchronous): `pg_basebackup -R -X stream`
    /// from it, on a port of its own, started. Call
    /// [`wait_streaming`](PgServer::wait_streaming) on the primary before a fault.
    pub fn standby_of(primary: &PgServer) -> io::Result<PgServer> {
        let server = PgServer::empty(&primary.bindir, "standby")?;
        let mut backup = server.tool("pg_basebackup");
        backup
            .args(["-h", "127.0.0.1", "-p", &primary.port.to_string()])
            .args(["-U", "postgres", "-D"])
            .arg(server.data())
            .args(["-R", "-X", "stream", "-c", "fast", "--no-sync"]);
        server.run(backup, "pg_basebackup")?;
        // The copied postgresql.conf names the primary's port and socket directory.
        server.configure("")?;
        server.start()?;
        Ok(server)
    }

    /// Appends the port, socket directory and `extra` to `postgresql.conf` (later lines
    /// win over earlier ones).
    fn configure(&self, extra: &str) -> io::Result<()> {
        let mut conf = fs::OpenOptions::new()
            .append(true)
            .open(self.data().join("postgresql.conf"))?;
        write!(
            conf,
            "\n# tenure test server\nport = {}\nlisten_addresses = '127.0.0.1'\n\
             unix_socket_directories = '{}'\n{extra}",
            self.port,
            self.dir.display()
        )
    }

    /// The data directory.
    pub fn data(&self) -> PathBuf {
        self.dir.join("data")
    }

    /// The server's log file.
    pub fn log(&self) -> PathBuf {
        self.dir.join("server.log")
    }

    /// The loopback port it listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `postgres://postgres@127.0.0.1:PORT/postgres`.
    pub fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    /// Moves the (stopped) server to `port`: it listens there from its next start.
    pub fn set_port(&mut self, port: u16) -> io::Result<()> {
        self.port = port;
        self.configure("")
    }

    /// A server tool, run as `postgres` when we are root.
    pub fn tool(&self, name: &str) -> Command {
        let path = self.bindir.join(name);
        let mut cmd = if !self.as_postgres {
            Command::new(path)
        } else if Path::new("/usr/sbin/runuser").exists() || Path::new("/sbin/runuser").exists() {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(path);
            c
        } else {
            // `su` hands the words after the user to the shell ($0 is the tool).
            let mut c = Command::new("su");
            c.args(["-s", "/bin/sh", "-c", r#"exec "$0" "$@""#])
                .args(["--", "postgres"])
                .arg(path);
            c
        };
        cmd.current_dir(&self.dir).stdin(Stdio::null());
        cmd
    }

    fn run(&self, mut cmd: Command, what: &str) -> io::Result<()> {
        let out = cmd.output()?;
        if out.status.success() {
            Ok(())
        } else {
            Err(fail(what, &out, &self.log()))
        }
    }

    fn pg_ctl(&self, args: &[&str]) -> Command {
        let mut cmd = self.tool("pg_ctl");
        cmd.arg("-D")
            .arg(self.data())
            .arg("-l")
            .arg(self.log())
            .args(["-t", "60"])
            .args(args);
        cmd
    }

    /// `pg_ctl -w start`: returns when the server accepts connections (a standby:
    /// read-only ones).
    pub fn start(&self) -> io::Result<()> {
        self.run(self.pg_ctl(&["-w", "start"]), "pg_ctl start")
    }

    /// `pg_ctl -w -m fast stop`: clients are told (57P01) and disconnected.
    pub fn stop(&self) -> io::Result<()> {
        self.run(self.pg_ctl(&["-w", "-m", "fast", "stop"]), "pg_ctl stop")
    }

    /// `pg_ctl -w -m fast restart`.
    pub fn restart(&self) -> io::Result<()> {
        self.run(
            self.pg_ctl(&["-w", "-m", "fast", "restart"]),
            "pg_ctl restart",
        )
    }

    /// `pg_ctl -w promote`: a standby becomes a primary; returns when it accepts
    /// writes.
    pub fn promote(&self) -> io::Result<()> {
        self.run(self.pg_ctl(&["-w", "promote"]), "pg_ctl promote")
    }

    /// The postmaster's pid, from `postmaster.pid`, while it runs.
    pub fn pid(&self) -> Option<u32> {
        let text = fs::read_to_string(self.data().join("postmaster.pid")).ok()?;
        let pid: u32 = text.lines().next()?.trim().parse().ok()?;
        (Path::new(&format!("/proc/{pid}")).exists() && !is_zombie(pid)).then_some(pid)
    }

    /// Sends `signal` (`KILL`, `STOP`, `CONT`, ...) to the postmaster and every process
    /// it started. The postmaster is stopped (SIGSTOP) while its children are listed,
    /// so it forks none in between.
    pub fn signal(&self, signal: &str) -> io::Result<()> {
        let Some(pid) = self.pid() else {
            return Ok(());
        };
        let pids = self.family(pid);
        let st = Command::new("kill")
            .arg(format!("-{signal}"))
            .args(pids.iter().map(u32::to_string))
            .stderr(Stdio::null())
            .status()?;
        if !st.success() && signal != "KILL" {
            return Err(io::Error::other(format!("kill -{signal} {pids:?}")));
        }
        if signal != "STOP" {
            // `family` stopped the postmaster; the signal may not have resumed it.
            let _ = Command::new("kill")
                .args(["-CONT", &pid.to_string()])
                .stderr(Stdio::null())
                .status();
        }
        Ok(())
    }

    /// The postmaster (stopped, so it starts no process meanwhile) and its children.
    fn family(&self, pid: u32) -> Vec<u32> {
        let _ = Command::new("kill")
            .args(["-STOP", &pid.to_string()])
            .stderr(Stdio::null())
            .status();
        let mut pids = vec![pid];
        pids.extend(children(pid));
        pids
    }

    /// SIGKILL to the postmaster and all its processes, as a crash or a lost machine:
    /// returns when every one of them is gone. Nothing is told to the clients; their
    /// connections are reset. The next [`start`](PgServer::start) runs crash recovery.
    pub fn kill(&self) -> io::Result<()> {
        let Some(pid) = self.pid() else {
            return Ok(());
        };
        let pids = self.family(pid);
        let st = Command::new("kill")
            .arg("-KILL")
            .args(pids.iter().map(u32::to_string))
            .stderr(Stdio::null())
            .status()?;
        if !st.success() && Path::new(&format!("/proc/{pid}")).exists() && !is_zombie(pid) {
            return Err(io::Error::other(format!("kill -KILL {pids:?}")));
        }
        let deadline = Instant::now() + Duration::from_secs(30);
        while pids
            .iter()
            .any(|p| Path::new(&format!("/proc/{p}/stat")).exists() && !is_zombie(*p))
        {
            if Instant::now() > deadline {
                return Err(io::Error::other(format!("{pids:?} did not die")));
            }
            sleep(Duration::from_millis(10));
        }
        // A killed postmaster may stay a zombie for a while where nobody reaps it
        // promptly, and the next start would take its lock files for a live server's.
        let socket_lock = self.dir.join(format!(".s.PGSQL.{}.lock", self.port));
        for lock in [self.data().join("postmaster.pid"), socket_lock] {
            match fs::remove_file(lock) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
                _ => {}
            }
        }
        Ok(())
    }

    /// One statement through `psql` (`-At`: unaligned, no headers), its output trimmed.
    pub fn psql(&self, sql: &str) -> io::Result<String> {
        let mut cmd = self.tool("psql");
        cmd.args(["-h", "127.0.0.1", "-p", &self.port.to_string()])
            .args(["-U", "postgres", "-d", "postgres", "-X", "-At", "-v"])
            .arg("ON_ERROR_STOP=1")
            .arg("-c")
            .arg(sql);
        let out = cmd.output()?;
        if !out.status.success() {
            return Err(fail("psql", &out, &self.log()));
        }
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
    }

    /// Waits (up to `within`) until `standbys` standbys stream from this primary
    /// (`pg_stat_replication.state = 'streaming'`).
    pub fn wait_streaming(&self, standbys: usize, within: Duration) -> io::Result<()> {
        let sql = "SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'";
        self.wait_for(within, "standbys streaming", || {
            Ok(self.psql(sql)?.parse::<usize>().unwrap_or(0) >= standbys)
        })
    }

    /// Waits (up to `within`) until `standby` has replayed everything this primary has
    /// written so far.
    pub fn wait_replayed(&self, standby: &PgServer, within: Duration) -> io::Result<()> {
        let lsn = self.psql("SELECT pg_current_wal_lsn()")?;
        let sql = format!("SELECT pg_last_wal_replay_lsn() >= '{lsn}'::pg_lsn");
        self.wait_for(within, "the standby replayed", || {
            Ok(standby.psql(&sql)? == "t")
        })
    }

    fn wait_for(
        &self,
        within: Duration,
        what: &str,
        mut ok: impl FnMut() -> io::Result<bool>,
    ) -> io::Result<()> {
        let deadline = Instant::now() + within;
        loop {
            match ok() {
                Ok(true) => return Ok(()),
                Ok(false) | Err(_) if Instant::now() < deadline => {
                    sleep(Duration::from_millis(20));
                }
                Ok(false) => {
                    return Err(io::Error::other(format!("{what}: not within {within:?}")))
                }
                Err(e) => return Err(e),
            }
        }
    }
}

impl Drop for PgServer {
    fn drop(&mut self) {
        if let Err(e) = self.kill() {
            eprintln!("could not kill the server in {}: {e}", self.dir.display());
        }
        if let Err(e) = fs::remove_dir_all(&self.dir) {
            eprintln!("could not remove {}: {e}", self.dir.display());
        }
    }
}

/// The processes whose parent is `pid` (from `/proc/*/stat`).
fn children(pid: u32) -> Vec<u32> {
    let Ok(dir) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|p| stat_field(*p, 1).is_some_and(|ppid| ppid == pid.to_string()))
        .collect()
}

fn is_zombie(pid: u32) -> bool {
    stat_field(pid, 0).is_some_and(|s| s == "Z")
}

/// Field `n` after the command name of `/proc/PID/stat` (0: the state, 1: the ppid).
fn stat_field(pid: u32, n: usize) -> Option<String> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = stat.rsplit_once(')')?.1;
    after.split_whitespace().nth(n).map(str::to_owned)
}
