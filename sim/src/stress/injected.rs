//! Faults injected into the stress run where the engine runs for real (issue #51): a
//! `switchboard serve` process killed with SIGKILL mid-run and started again on its address, the
//! database crashed (an immediate stop) and started again while every replica keeps running, and
//! clients that hang up mid-request. The schedule is fixed by the plan and the seed; the
//! interleavings are not, which is what real concurrency means.

use super::agents::{World, abandon_requests};
use super::push::Listeners;
use super::replicas::{ProcessReplica, Replicas};
use super::{StressConfig, Tally};
use models::store::Store;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Which faults a run injects, and when (measured from the agents' start).
#[derive(Debug, Clone)]
pub struct FaultPlan {
    /// When the first `switchboard serve` process is killed (SIGKILL) and started again.
    pub kill_process_at: Option<Duration>,
    /// When PostgreSQL is crashed (`pg_ctl stop -m immediate`) and started again, each time.
    /// The database must be the test binary's throwaway cluster (`engine::testing::cluster`).
    pub crash_database_at: Vec<Duration>,
    /// How long the database stays down.
    pub database_down_for: Duration,
    /// Requests sent and given up on after 0–30 ms (claims, creates, policy writes, HTTP and MCP).
    pub aborted_requests: usize,
}

impl FaultPlan {
    pub fn small() -> FaultPlan {
        FaultPlan {
            kill_process_at: Some(Duration::from_secs(6)),
            crash_database_at: vec![Duration::from_secs(13)],
            database_down_for: Duration::from_secs(1),
            aborted_requests: 120,
        }
    }
}

/// Makes every later connection to the run's database commit durably, as production does: the
/// throwaway clusters run with `synchronous_commit` off for speed, and a crash then loses commits
/// already acknowledged, which no server can be judged by. A crash of the server process keeps
/// what reached the operating system, so `fsync` may stay off.
pub(super) async fn durable_commits(pool: &sqlx::PgPool) -> Result<(), sqlx::Error> {
    sqlx::query(
        "DO $$ BEGIN EXECUTE format('ALTER DATABASE %I SET synchronous_commit = on', current_database()); END $$",
    )
    .execute(pool)
    .await
    .map(|_| ())
}

/// Runs the plan's faults beside the agents; answers what was injected, in words.
pub(super) async fn inject<S: Store>(
    binary: &Path,
    database_url: &str,
    config: &StressConfig,
    replicas: &mut Replicas<S>,
    listeners: Option<&Listeners>,
    world: &World,
    tally: &Arc<Mutex<Tally>>,
) -> Vec<String> {
    let Some(plan) = &config.faults else { return Vec::new() };
    let started = Instant::now();
    let aborting = abandon_requests(world, plan.aborted_requests, config.run_for, config.seed, tally);
    let scheduled = async {
        let mut injected = Vec::new();
        let mut events: Vec<(Duration, bool)> = Vec::new();
        events.extend(plan.kill_process_at.map(|at| (at, true)));
        events.extend(plan.crash_database_at.iter().map(|at| (*at, false)));
        events.sort();
        for (at, is_kill) in events {
            tokio::time::sleep(at.saturating_sub(started.elapsed())).await;
            if is_kill {
                injected.push(kill_and_restart(binary, database_url, config, replicas, started).await);
            } else {
                injected.push(crash_database(plan.database_down_for, listeners, started).await);
            }
        }
        injected
    };
    let ((), injected) = tokio::join!(aborting, scheduled);
    injected
}

/// SIGKILL to the first process replica, then the same binary started on its address.
async fn kill_and_restart<S: Store>(
    binary: &Path,
    database_url: &str,
    config: &StressConfig,
    replicas: &mut Replicas<S>,
    started: Instant,
) -> String {
    let Some(process) = replicas.processes.first_mut() else {
        return "no process replica to kill".into();
    };
    let at = started.elapsed();
    process.kill().await;
    let address = process.base.trim_start_matches("http://").to_string();
    let killed_at = Instant::now();
    tokio::time::sleep(Duration::from_millis(500)).await;
    match ProcessReplica::start_on(binary, database_url, config, &address).await {
        Ok(restarted) => {
            *process = restarted;
            format!(
                "replica process on {address} killed (SIGKILL) at {:.1}s, serving again {:.1}s later",
                at.as_secs_f64(),
                killed_at.elapsed().as_secs_f64()
            )
        }
        Err(error) => panic!("the killed replica did not start again on {address}: {error}"),
    }
}

/// PostgreSQL stopped with `-m immediate` (a crash: no checkpoint, every connection cut) and
/// started again after `down_for`; the replicas are not restarted.
async fn crash_database(down_for: Duration, listeners: Option<&Listeners>, started: Instant) -> String {
    let at = started.elapsed();
    if let Some(listeners) = listeners {
        listeners.database_is(false);
    }
    let cluster = engine::testing::cluster();
    let crash = tokio::task::spawn_blocking(move || cluster.stop("immediate")).await;
    assert!(matches!(crash, Ok(Ok(()))), "pg_ctl stop -m immediate failed: {crash:?}");
    tokio::time::sleep(down_for).await;
    let restart = tokio::task::spawn_blocking(move || cluster.start()).await;
    assert!(matches!(restart, Ok(Ok(()))), "PostgreSQL did not start again: {restart:?}");
    if let Some(listeners) = listeners {
        listeners.database_is(true);
    }
    format!(
        "PostgreSQL crashed (immediate stop) at {:.1}s and started again {:.1}s later, the replicas running on",
        at.as_secs_f64(),
        (started.elapsed() - at).as_secs_f64()
    )
}
