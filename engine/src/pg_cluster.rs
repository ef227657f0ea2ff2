//! Starts and stops a PostgreSQL cluster from the machine's own server binaries.
//!
//! One launcher serves two callers: `switchboard serve`'s embedded default (durable, Unix socket
//! only, in the data dir) and the test harness (throwaway, fsync off, TCP on a free port).
//! initdb and postgres refuse to run as root, so as root every server process runs as the
//! `postgres` OS user, in directories that user owns (design.md, "Throwaway Postgres").

use std::fs;
use std::io;
use std::os::unix::fs::{PermissionsExt, chown};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// How to install the server binaries, for every message that has to say so.
pub const INSTALL_HINT: &str = "install PostgreSQL's server binaries (Debian/Ubuntu: `apt-get install postgresql`), \
     set PG_BIN to the directory holding initdb and pg_ctl, or pass --database-url";

/// Unix socket paths are limited to 107 bytes (sun_path).
const SOCKET_PATH_LENGTH_MAX: usize = 100;

/// The directory holding `initdb`, `pg_ctl` and `postgres`.
#[derive(Debug, Clone)]
pub struct PgBinaries {
    pub dir: PathBuf,
}

impl PgBinaries {
    /// Looks in `PG_BIN`, then `pg_config --bindir`, then the newest `/usr/lib/postgresql/*/bin`.
    pub fn locate() -> Result<PgBinaries, String> {
        let has_server = |dir: &Path| dir.join("initdb").is_file() && dir.join("pg_ctl").is_file();
        if let Ok(dir) = std::env::var("PG_BIN") {
            let dir = PathBuf::from(dir);
            return if has_server(&dir) {
                Ok(PgBinaries { dir })
            } else {
                Err(format!("PG_BIN={} holds no initdb/pg_ctl; {INSTALL_HINT}", dir.display()))
            };
        }
        if let Ok(out) = Command::new("pg_config").arg("--bindir").output()
            && out.status.success()
        {
            let dir = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
            if has_server(&dir) {
                return Ok(PgBinaries { dir });
            }
        }
        let mut versions: Vec<(u32, PathBuf)> = fs::read_dir("/usr/lib/postgresql")
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|entry| {
                let version = entry.file_name().to_string_lossy().parse::<u32>().ok()?;
                let bin = entry.path().join("bin");
                has_server(&bin).then_some((version, bin))
            })
            .collect();
        versions.sort();
        match versions.pop() {
            Some((_, dir)) => Ok(PgBinaries { dir }),
            None => Err(format!("no PostgreSQL server binaries found on this machine; {INSTALL_HINT}")),
        }
    }

    fn command(&self, program: &str, run_as: Option<(u32, u32)>) -> Command {
        let mut command = Command::new(self.dir.join(program));
        command.env("LC_ALL", "C").env_remove("PGDATA");
        if let Some((uid, gid)) = run_as {
            command.uid(uid).gid(gid);
        }
        command
    }
}

/// The `postgres` OS user's (uid, gid) when this process is root, else None.
pub fn postgres_user_if_root() -> io::Result<Option<(u32, u32)>> {
    if effective_uid()? != 0 {
        return Ok(None);
    }
    let passwd = fs::read_to_string("/etc/passwd")?;
    for line in passwd.lines() {
        let fields: Vec<&str> = line.split(':').collect();
        if fields.len() >= 4 && fields[0] == "postgres" {
            let uid = fields[2].parse().map_err(|_| io::Error::other("bad uid for postgres in /etc/passwd"))?;
            let gid = fields[3].parse().map_err(|_| io::Error::other("bad gid for postgres in /etc/passwd"))?;
            return Ok(Some((uid, gid)));
        }
    }
    Err(io::Error::other(format!(
        "running as root, and PostgreSQL refuses to run as root, but there is no `postgres` OS user; {INSTALL_HINT}"
    )))
}

/// Whether the `postgres` OS user (when we are root) can walk to `dir`. Always true otherwise.
pub fn reachable_by_postgres(dir: &Path) -> io::Result<bool> {
    let Some((uid, gid)) = postgres_user_if_root()? else {
        return Ok(true);
    };
    Ok(Command::new("test").arg("-x").arg(dir).uid(uid).gid(gid).status()?.success())
}

/// Reads the effective uid from /proc (no unsafe libc call needed).
fn effective_uid() -> io::Result<u32> {
    let status = fs::read_to_string("/proc/self/status")?;
    status
        .lines()
        .find_map(|line| line.strip_prefix("Uid:"))
        .and_then(|ids| ids.split_whitespace().nth(1))
        .and_then(|euid| euid.parse().ok())
        .ok_or_else(|| io::Error::other("cannot read the effective uid from /proc/self/status"))
}

/// How the cluster listens and how durable it is.
#[derive(Debug, Clone)]
pub struct ClusterConfig {
    /// `None`: Unix socket only (the embedded default). `Some(port)`: also 127.0.0.1:port.
    pub tcp_port: Option<u16>,
    /// Durable settings (fsync on) for real data; off for throwaway test clusters.
    pub durable: bool,
    pub max_connections: u32,
}

/// A cluster in a directory: `root/data` holds the data, the socket lives in `socket_dir`.
#[derive(Debug, Clone)]
pub struct Cluster {
    pub bins: PgBinaries,
    pub root: PathBuf,
    pub socket_dir: PathBuf,
    pub config: ClusterConfig,
    run_as: Option<(u32, u32)>,
}

/// The superuser every cluster made here is initialised with.
pub const SUPERUSER: &str = "postgres";
/// The port number names the socket file (`.s.PGSQL.<port>`) even when TCP is off.
pub const SOCKET_PORT: u16 = 5432;

impl Cluster {
    /// Prepares `root` (creating it, and handing it to the `postgres` user when root) without
    /// starting anything.
    pub fn new(bins: PgBinaries, root: &Path, config: ClusterConfig) -> io::Result<Cluster> {
        let run_as = postgres_user_if_root()?;
        fs::create_dir_all(root)?;
        let root = root.canonicalize()?;
        let mut socket_dir = root.clone();
        if socket_dir.join(".s.PGSQL.65535").as_os_str().len() > SOCKET_PATH_LENGTH_MAX {
            // A deep data dir cannot hold the socket; use a short, stable directory per cluster.
            socket_dir = PathBuf::from(format!("/tmp/switchboard-{:016x}", stable_hash(&root)));
            fs::create_dir_all(&socket_dir)?;
        }
        for dir in [&root, &socket_dir] {
            fs::set_permissions(dir, fs::Permissions::from_mode(0o700))?;
            if let Some((uid, gid)) = run_as {
                chown(dir, Some(uid), Some(gid))?;
            }
        }
        let cluster = Cluster { bins, root, socket_dir, config, run_as };
        cluster.check_reachable()?;
        Ok(cluster)
    }

    pub fn data_dir(&self) -> PathBuf {
        self.root.join("data")
    }

    fn port(&self) -> u16 {
        self.config.tcp_port.unwrap_or(SOCKET_PORT)
    }

    /// As root, the `postgres` user must be able to walk to the directory; say so plainly if not.
    fn check_reachable(&self) -> io::Result<()> {
        if self.run_as.is_none() {
            return Ok(());
        }
        let status = Command::new("test")
            .arg("-w")
            .arg(&self.root)
            .uid(self.run_as.map_or(0, |ids| ids.0))
            .gid(self.run_as.map_or(0, |ids| ids.1))
            .status()?;
        if status.success() {
            Ok(())
        } else {
            Err(io::Error::other(format!(
                "the `postgres` OS user cannot reach {} (a parent directory is not traversable by others); \
                 choose a --data-dir under a directory such as /var/lib or /srv",
                self.root.display()
            )))
        }
    }

    pub fn is_initialised(&self) -> bool {
        self.data_dir().join("PG_VERSION").is_file()
    }

    /// Runs initdb once; a data dir that already holds a cluster is kept as it is.
    pub fn init_if_needed(&self) -> io::Result<bool> {
        if self.is_initialised() {
            return Ok(false);
        }
        let mut initdb = self.bins.command("initdb", self.run_as);
        initdb.arg("-D").arg(self.data_dir()).args(["-U", SUPERUSER, "--auth=trust", "-E", "UTF8", "--no-locale"]);
        if !self.config.durable {
            initdb.arg("--no-sync");
        }
        check(initdb.output()?, "initdb")?;
        Ok(true)
    }

    /// True when a postmaster is running on this data dir (whoever started it).
    pub fn is_running(&self) -> bool {
        self.bins
            .command("pg_ctl", self.run_as)
            .arg("status")
            .arg("-D")
            .arg(self.data_dir())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|status| status.success())
    }

    /// Starts the postmaster and waits until it accepts connections.
    pub fn start(&self) -> io::Result<()> {
        let listen = match self.config.tcp_port {
            Some(_) => "127.0.0.1",
            None => "",
        };
        // Each log line names its database: the plan tests read the plans of their own database
        // out of a log that every test of the process writes to.
        let mut options = format!(
            "-p {} -k {} -c listen_addresses='{listen}' -c max_connections={} -c unix_socket_permissions=0700 \
             -c log_line_prefix='%m [%p] db=%d '",
            self.port(),
            self.socket_dir.display(),
            self.config.max_connections,
        );
        if !self.config.durable {
            options.push_str(" -c fsync=off -c synchronous_commit=off -c full_page_writes=off");
        }
        let output = self
            .bins
            .command("pg_ctl", self.run_as)
            .arg("-D")
            .arg(self.data_dir())
            .arg("-l")
            .arg(self.root.join("postgres.log"))
            .args(["-w", "-t", "60", "-o", &options, "start"])
            .stdin(Stdio::null())
            .output()?;
        check(output, "pg_ctl start").map_err(|error| {
            let log = fs::read_to_string(self.root.join("postgres.log")).unwrap_or_default();
            let tail: Vec<&str> = log.lines().rev().take(5).collect();
            io::Error::other(format!(
                "{error}; postgres.log ends: {}",
                tail.into_iter().rev().collect::<Vec<_>>().join(" | ")
            ))
        })
    }

    /// Stops the postmaster: `fast` rolls back open transactions and shuts down cleanly;
    /// `immediate` is for throwaway clusters.
    pub fn stop(&self, mode: &str) -> io::Result<()> {
        let output = self
            .bins
            .command("pg_ctl", self.run_as)
            .arg("-D")
            .arg(self.data_dir())
            .args(["-m", mode, "-w", "-t", "60", "stop"])
            .stdin(Stdio::null())
            .output()?;
        check(output, "pg_ctl stop")
    }

    /// A connection URL over TCP (test clusters).
    pub fn tcp_url(&self, database: &str) -> Option<String> {
        self.config.tcp_port.map(|port| format!("postgres://{SUPERUSER}@127.0.0.1:{port}/{database}"))
    }

    /// A connection URL over the Unix socket; sqlx reads a `host` starting with `/` as a socket dir.
    pub fn socket_url(&self, database: &str) -> String {
        format!(
            "postgres://{SUPERUSER}@localhost:{}/{database}?host={}",
            self.port(),
            percent_encode_path(&self.socket_dir)
        )
    }

    /// Starts a watchdog that stops this (throwaway) cluster and removes its directory once the
    /// process `owner_pid` is gone, however it ended. Test binaries exit without dropping statics,
    /// and a killed test must not leave a postmaster behind.
    pub fn remove_when_process_exits(&self, owner_pid: u32) -> io::Result<()> {
        let script = format!(
            "while kill -0 {owner_pid} 2>/dev/null; do sleep 0.5; done; \
             kill -QUIT \"$(head -n 1 '{data}/postmaster.pid' 2>/dev/null)\" 2>/dev/null; \
             sleep 1; rm -rf '{root}'",
            data = self.data_dir().display(),
            root = self.root.display(),
        );
        Command::new("sh")
            .arg("-c")
            .arg(script)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()?;
        Ok(())
    }
}

fn check(output: Output, what: &str) -> io::Result<()> {
    if output.status.success() {
        return Ok(());
    }
    Err(io::Error::other(format!(
        "{what} failed ({}): {}{}",
        output.status,
        String::from_utf8_lossy(&output.stderr).trim(),
        String::from_utf8_lossy(&output.stdout).trim()
    )))
}

fn percent_encode_path(path: &Path) -> String {
    let mut encoded = String::new();
    for byte in path.as_os_str().as_encoded_bytes() {
        match byte {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => encoded.push(*byte as char),
            other => encoded.push_str(&format!("%{other:02X}")),
        }
    }
    encoded
}

/// FNV-1a: a stable name for a socket directory derived from a data dir's path.
fn stable_hash(path: &Path) -> u64 {
    path.as_os_str()
        .as_encoded_bytes()
        .iter()
        .fold(0xcbf2_9ce4_8422_2325_u64, |hash, byte| (hash ^ u64::from(*byte)).wrapping_mul(0x0100_0000_01b3))
}
