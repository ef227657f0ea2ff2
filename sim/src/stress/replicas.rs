//! The stress run's replicas: the production router served in process over a store, and
//! `switchboard serve` child processes (with the binary located, and rebuilt when stale).

use super::{METRICS_TOKEN, PROCESS_START_TIMEOUT, StoreHook, StressConfig, Tally, in_process_store, lock};
use models::store::Store;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// The replicas of one run: `in_process_replicas` served over hooked stores, then
/// `process_replicas` child processes; `bases` lists their URLs in that order.
pub(super) struct Replicas<S> {
    pub(super) bases: Vec<String>,
    pub(super) stores: Vec<S>,
    pub(super) processes: Vec<ProcessReplica>,
    tasks: Vec<JoinHandle<()>>,
    shutdown: watch::Sender<bool>,
}

impl<S: Store> Replicas<S> {
    /// Starts every replica; panics on a setup failure.
    pub(super) async fn start<H: StoreHook<Store = S>>(
        binary: &Path,
        database_url: &str,
        config: &StressConfig,
        hook: &H,
    ) -> Replicas<S> {
        let (shutdown, shutdown_rx) = watch::channel(false);
        let mut bases: Vec<String> = Vec::new();
        let mut tasks: Vec<JoinHandle<()>> = Vec::new();
        let mut stores: Vec<S> = Vec::new();
        for replica in 0..config.in_process_replicas {
            let store = in_process_store(database_url, config, replica, hook).await.unwrap_or_else(|e| panic!("{e}"));
            stores.push(store.clone());
            let (base, mut handles) =
                serve_in_process(store, database_url, config.reaper_interval, shutdown_rx.clone())
                    .await
                    .unwrap_or_else(|e| panic!("replica {replica}: {e}"));
            bases.push(base);
            tasks.append(&mut handles);
        }
        let mut processes = Vec::new();
        for replica in 0..config.process_replicas {
            let process = ProcessReplica::start(binary, database_url, config)
                .await
                .unwrap_or_else(|e| panic!("process replica {replica}: {e}"));
            bases.push(process.base.clone());
            processes.push(process);
        }
        assert!(!bases.is_empty(), "the stress needs at least one replica");
        Replicas { bases, stores, processes, tasks, shutdown }
    }

    /// Stops the in-process replicas and the processes; a replica that does not stop cleanly is
    /// an unexpected outcome in `tally`.
    pub(super) async fn stop(self, tally: &Mutex<Tally>) {
        let _ = self.shutdown.send(true);
        for task in self.tasks {
            if tokio::time::timeout(Duration::from_secs(10), task).await.is_err() {
                lock(tally).unexpected("an in-process replica did not stop within 10 s".into());
            }
        }
        for process in self.processes {
            if let Err(error) = process.stop().await {
                lock(tally).unexpected(error);
            }
        }
    }
}

/// Serves the production router over `store` on 127.0.0.1:0 with what `switchboard serve` runs
/// beside it: the sweeps, the push loops under a replica id of its own, and the listener that
/// delivers doorbells other replicas decided to the streams it holds (issue #51: without them a
/// stream attached here heard only this replica's rings). All stop when `shutdown` turns true.
async fn serve_in_process<S: Store>(
    store: S,
    database_url: &str,
    reaper_interval: Duration,
    shutdown: watch::Receiver<bool>,
) -> Result<(String, Vec<JoinHandle<()>>), String> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.map_err(|e| e.to_string())?;
    let address = listener.local_addr().map_err(|e| e.to_string())?;
    let sweeps = engine::sweeps::spawn(store.clone(), reaper_interval, shutdown.clone());
    let hub = std::sync::Arc::new(server::push::Hub::new(server::push::Hub::random_replica_id()));
    let mut handles = server::push::tasks::spawn(
        store.clone(),
        hub.clone(),
        reaper_interval,
        server::hook_sender::AddressPolicy::PublicOnly,
        shutdown.clone(),
    );
    let pool = sqlx::PgPool::connect(database_url).await.map_err(|e| format!("connect for doorbells: {e}"))?;
    handles.push(server::serve::listen_for_doorbells(store.clone(), pool, hub.clone(), shutdown.clone()));
    let app = server::app::router(server::app::AppState { push: hub, ..server::app::AppState::new(store) });
    let mut graceful = shutdown;
    let serving = tokio::spawn(async move {
        let served = axum::serve(listener, app).with_graceful_shutdown(async move {
            let _ = graceful.wait_for(|stop| *stop).await;
        });
        if let Err(error) = served.await {
            tracing::warn!(%error, "in-process replica stopped with an error");
        }
    });
    handles.extend([sweeps, serving]);
    Ok((format!("http://{address}"), handles))
}

/// A `switchboard serve` child process.
pub(super) struct ProcessReplica {
    child: tokio::process::Child,
    pub(super) base: String,
}

impl ProcessReplica {
    pub(super) async fn start(
        binary: &Path,
        database_url: &str,
        config: &StressConfig,
    ) -> Result<ProcessReplica, String> {
        ProcessReplica::start_on(binary, database_url, config, "127.0.0.1:0").await
    }

    /// `start`, listening on `listen` (a killed replica comes back on its own address).
    pub(super) async fn start_on(
        binary: &Path,
        database_url: &str,
        config: &StressConfig,
        listen: &str,
    ) -> Result<ProcessReplica, String> {
        let reaper_seconds = config.reaper_interval.as_secs().max(1).to_string();
        let pool_size = config.pool_connections_max.max(2).to_string();
        let mut child = tokio::process::Command::new(binary)
            .args(["serve", "--database-url", database_url, "--listen", listen])
            .args(["--reaper-interval", &reaper_seconds, "--pool-size", &pool_size])
            .env_remove("DATABASE_URL")
            .env("RUST_LOG", "warn")
            .env("SWITCHBOARD_METRICS_TOKEN", METRICS_TOKEN)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("spawn {}: {e}", binary.display()))?;
        let stdout = child.stdout.take().ok_or("no stdout")?;
        let mut lines = BufReader::new(stdout).lines();
        let listening = tokio::time::timeout(PROCESS_START_TIMEOUT, async {
            while let Ok(Some(line)) = lines.next_line().await {
                if let Some(base) = line.strip_prefix("switchboard listening on ") {
                    return Some(base.to_string());
                }
            }
            None
        })
        .await;
        let Ok(Some(base)) = listening else {
            let _ = child.kill().await;
            return Err("switchboard serve did not print its listening line".into());
        };
        // Keep draining stdout so the child never blocks on a full pipe.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        Ok(ProcessReplica { child, base })
    }

    /// SIGKILL: the process dies mid-work, as in a crash.
    pub(super) async fn kill(&mut self) {
        let _ = self.child.kill().await;
    }

    /// SIGTERM (graceful stop), then SIGKILL if it takes longer than 20 s.
    pub(super) async fn stop(mut self) -> Result<(), String> {
        let Some(pid) = self.child.id() else { return Ok(()) };
        let _ = tokio::process::Command::new("kill").args(["-TERM", &pid.to_string()]).status().await;
        match tokio::time::timeout(Duration::from_secs(20), self.child.wait()).await {
            Ok(Ok(status)) if status.success() => Ok(()),
            Ok(Ok(status)) => Err(format!("switchboard serve (pid {pid}) exited with {status}")),
            Ok(Err(error)) => Err(format!("waiting for pid {pid}: {error}")),
            Err(_) => {
                let _ = self.child.kill().await;
                Err(format!("switchboard serve (pid {pid}) ignored SIGTERM for 20 s"))
            }
        }
    }
}

/// The `switchboard` binary: `SWITCHBOARD_BIN`, else in the profile directory of the running
/// executable: target/PROFILE/switchboard next to a test (target/PROFILE/deps/TEST) or next to
/// the `sim` CLI (target/PROFILE/sim). `cargo test --workspace` builds it; `cargo test -p sim`
/// does not, so when it is missing, or older than the sources it is built from, it is built here
/// with `$CARGO build -p server --bin switchboard` into the same target directory (cargo holds
/// no build lock while tests run).
pub fn switchboard_binary() -> Result<PathBuf, String> {
    if let Ok(path) = std::env::var("SWITCHBOARD_BIN") {
        return Ok(PathBuf::from(path));
    }
    let exe = std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?;
    let exe_dir = exe.parent().ok_or_else(|| format!("{} has no directory", exe.display()))?;
    let profile_dir = if exe_dir.file_name().is_some_and(|name| name == "deps") {
        exe_dir.parent().ok_or_else(|| format!("{} has no profile directory", exe.display()))?
    } else {
        exe_dir
    };
    let binary = profile_dir.join("switchboard");
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).parent().ok_or("sim has no parent directory")?;
    let built_at = std::fs::metadata(&binary).and_then(|m| m.modified()).ok();
    // What the binary is compiled from (tests and benches are not).
    let sources = ["models/src", "engine/src", "server/src", "migrations"].map(|dir| workspace.join(dir));
    let newest_source = sources.iter().filter_map(|dir| newest_modification(dir, 0)).max();
    let why = match (built_at, newest_source) {
        (None, _) => "is missing",
        (Some(built), Some(source)) if source > built => "is older than its sources",
        _ => return Ok(binary),
    };
    let target_dir = profile_dir.parent().ok_or("the profile directory has no parent")?;
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    println!("stress: {} {why}; running `{cargo} build -p server --bin switchboard`", binary.display());
    let mut command = std::process::Command::new(&cargo);
    command
        .args(["build", "-p", "server", "--bin", "switchboard"])
        .env("CARGO_TARGET_DIR", target_dir)
        .current_dir(workspace);
    if profile_dir.file_name().is_some_and(|name| name == "release") {
        command.arg("--release");
    }
    let status = command.status().map_err(|e| format!("run {cargo}: {e}"))?;
    if !status.success() || !binary.is_file() {
        return Err(format!("`{cargo} build -p server --bin switchboard` failed ({status})"));
    }
    Ok(binary)
}

/// The latest modification time of any file under `path` (a few directory levels deep).
fn newest_modification(path: &Path, depth: usize) -> Option<std::time::SystemTime> {
    let metadata = std::fs::metadata(path).ok()?;
    if !metadata.is_dir() {
        return metadata.modified().ok();
    }
    if depth > 6 {
        return None;
    }
    std::fs::read_dir(path).ok()?.filter_map(Result::ok).filter_map(|e| newest_modification(&e.path(), depth + 1)).max()
}
