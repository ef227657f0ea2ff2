//! `switchboard`: the server and its command line in one binary (contract §1).

use clap::{Args, Parser, Subcommand};
use engine::{PgStore, PoolSettings};
use models::scope::TeamRole;
use models::store::SystemClock;
use serde_json::json;
use server::database::{self, Target};
use server::public_url::PublicUrl;
use server::serve::{self, ServeOptions};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

/// Every request allocates on each hop it crosses (hyper, axum, the JSON layer, sqlx's rows).
/// Under glibc's malloc, allocating and freeing were about a fifth of the runtime threads' CPU in
/// `bench_mcp` through MCP, on cores shared with PostgreSQL; mimalloc serves them faster
/// (`docs/benchmarks.md`, "The server on mimalloc").
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(
    name = "switchboard",
    version,
    about = "An admission-controlled work queue for AI agents.",
    long_about = "An admission-controlled work queue for AI agents.\n\n\
        Humans own endpoints; agents connect to an endpoint over MCP and drain its queues.\n\
        Start with `switchboard serve` (it runs its own PostgreSQL when no DATABASE_URL is set),\n\
        then `switchboard admin human add NAME` for an operator API token and\n\
        `switchboard admin login-link NAME` for a link that signs NAME in to the board.",
    after_help = "Environment: DATABASE_URL, SWITCHBOARD_LISTEN, SWITCHBOARD_REAPER_INTERVAL, SWITCHBOARD_PUBLIC_URL, RUST_LOG;\n\
        for `queue`, `todo`, `system` and `endpoint`: SWITCHBOARD_URL (default http://127.0.0.1:8080), SWITCHBOARD_TOKEN (sbh_...), SWITCHBOARD_CA_CERT."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Apply migrations, then serve the board (/), the operator API, MCP and /healthz until SIGINT/SIGTERM.
    Serve(ServeArgs),
    /// Apply the database migrations and exit.
    Migrate(DatabaseArgs),
    /// Bootstrap humans and teams, and print board sign-in links, directly in the database.
    Admin {
        #[command(subcommand)]
        command: AdminCommand,
    },
    /// `queue ...`, `todo ...`, `system ...` and `endpoint ...`: the operator CLI over the HTTP API.
    #[command(flatten)]
    Operator(server::cli::OperatorCommand),
}

#[derive(Args, Clone)]
struct DatabaseArgs {
    /// PostgreSQL URL. Without it (and without DATABASE_URL) switchboard runs its own
    /// PostgreSQL in DATA_DIR/pg, from this machine's server binaries.
    #[arg(long, env = "DATABASE_URL", hide_env_values = true)]
    database_url: Option<String>,
    /// Where the embedded PostgreSQL keeps its data.
    #[arg(long, value_name = "DIR", default_value = "./.switchboard")]
    data_dir: PathBuf,
}

#[derive(Args)]
struct ServeArgs {
    /// Address to listen on (port 0 picks a free port; the chosen address is printed).
    #[arg(long, env = "SWITCHBOARD_LISTEN", default_value = "127.0.0.1:8080")]
    listen: SocketAddr,
    #[command(flatten)]
    database: DatabaseArgs,
    /// Seconds between runs of the lease reaper and the retry scheduler.
    #[arg(long, env = "SWITCHBOARD_REAPER_INTERVAL", default_value_t = models::limits::REAPER_INTERVAL_DEFAULT.as_secs(), value_parser = clap::value_parser!(u64).range(1..=3600))]
    reaper_interval: u64,
    /// Most database connections this server opens.
    #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u32).range(2..=1000))]
    pool_size: u32,
    /// The URL clients reach this server at (http or https, optionally with a path prefix), when
    /// a proxy or TLS terminator stands in front: `mcp_url` and `ingest_url` are built on it.
    /// Without it they are http:// plus the request's Host header.
    #[arg(long, env = "SWITCHBOARD_PUBLIC_URL", value_name = "URL", value_parser = PublicUrl::parse)]
    public_url: Option<PublicUrl>,
    #[command(flatten)]
    load: server::load::LoadArgs,
}

#[derive(Subcommand)]
enum AdminCommand {
    /// Humans: the accountable principals.
    Human {
        #[command(subcommand)]
        command: HumanCommand,
    },
    /// Teams and their members.
    Team {
        #[command(subcommand)]
        command: TeamCommand,
    },
    /// Print a one-time sign-in URL for the web board (valid 10 minutes, single use).
    LoginLink {
        /// The human's name or id.
        name: String,
        /// Base URL of the board the link points at: the server's public URL when it has one.
        #[arg(long, env = "SWITCHBOARD_PUBLIC_URL", default_value = "http://127.0.0.1:8080")]
        base_url: String,
        #[command(flatten)]
        database: DatabaseArgs,
    },
}

#[derive(Subcommand)]
enum HumanCommand {
    /// Create (or find) human NAME and print {"human_id", "token"}: a new operator API bearer.
    Add {
        name: String,
        /// Make the human an instance admin.
        #[arg(long)]
        admin: bool,
        #[command(flatten)]
        database: DatabaseArgs,
    },
    /// Remove human NAME (name or id): revoke their tokens and endpoints, end their board
    /// sessions, drop their team memberships, and return todos leased to their endpoints to
    /// pending (attempt unchanged). Prints what was taken away as JSON.
    Remove {
        name: String,
        #[command(flatten)]
        database: DatabaseArgs,
    },
}

#[derive(Subcommand)]
enum TeamCommand {
    /// Create (or find) team NAME owned by HUMAN and print it as JSON.
    Add {
        name: String,
        /// The owning human's name or id.
        #[arg(long, value_name = "HUMAN")]
        owner: String,
        #[command(flatten)]
        database: DatabaseArgs,
    },
    /// Team membership.
    Member {
        #[command(subcommand)]
        command: MemberCommand,
    },
}

#[derive(Subcommand)]
enum MemberCommand {
    /// Add HUMAN to TEAM with ROLE (or change their role) and print it as JSON.
    Add {
        /// Team slug, id or name.
        team: String,
        /// Human name or id.
        human: String,
        #[arg(long, value_parser = ["owner", "admin", "member"])]
        role: String,
        #[command(flatten)]
        database: DatabaseArgs,
    },
    /// Remove HUMAN from TEAM: their reach over the team ends at once, and the team's todos
    /// leased to their endpoints return to pending (attempt unchanged). The last owner stays.
    Remove {
        /// Team slug, id or name.
        team: String,
        /// Human name or id.
        human: String,
        #[command(flatten)]
        database: DatabaseArgs,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let quiet = !matches!(cli.command, Command::Serve(_));
    init_logging(if quiet { "warn" } else { "info" });
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("error: cannot start the async runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    let command = match cli.command {
        // The operator CLI has its own exit statuses and error lines (contract §1: 1 refused, 2 usage).
        Command::Operator(command) => return runtime.block_on(server::cli::run(command)),
        command => command,
    };
    match runtime.block_on(run(command)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::FAILURE
        }
    }
}

fn init_logging(default_level: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(format!("{default_level},sqlx=warn")));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(std::io::stderr)
        .init();
}

async fn run(command: Command) -> Result<(), String> {
    match command {
        // main() runs these itself, before this point, for their own exit statuses.
        Command::Operator(_) => Err("operator commands are run by main()".into()),
        Command::Serve(args) => {
            serve::run(ServeOptions {
                listen: args.listen,
                database_url: args.database.database_url,
                data_dir: args.database.data_dir,
                reaper_interval: Duration::from_secs(args.reaper_interval),
                pool_connections_max: args.pool_size,
                public_url: args.public_url.unwrap_or_else(PublicUrl::from_request),
                load: args.load,
            })
            .await
        }
        Command::Migrate(database) => with_database(database, |_| async { Ok(json!({"migrated": true})) }).await,
        Command::Admin { command: AdminCommand::Human { command } } => run_human(command).await,
        Command::Admin { command: AdminCommand::Team { command } } => run_team(command).await,
        Command::Admin { command: AdminCommand::LoginLink { name, base_url, database } } => {
            with_database_text(database, |store| async move {
                let token = server::board::sessions::mint_login_link(store.pool(), &name)
                    .await
                    .map_err(|e| e.message)?
                    .ok_or_else(|| format!("not found: human {name}"))?;
                Ok(format!("{}/login/{token}", base_url.trim_end_matches('/')))
            })
            .await
        }
    }
}

/// `switchboard admin human add|remove`.
async fn run_human(command: HumanCommand) -> Result<(), String> {
    match command {
        HumanCommand::Add { name, admin, database } => {
            with_database(database, |store| async move {
                let (human, token) = store.bootstrap_human(&name, admin).await.map_err(|e| e.to_string())?;
                Ok(json!({ "human_id": human.id, "name": human.name, "admin": human.instance_admin, "token": token }))
            })
            .await
        }
        HumanCommand::Remove { name, database } => {
            with_database(database, |store| async move {
                let removed = store.remove_human(&name).await.map_err(|e| e.to_string())?;
                Ok(json!({
                    "human_id": removed.human_id,
                    "name": removed.name,
                    "removed": true,
                    "tokens_revoked": removed.tokens_revoked,
                    "board_sessions_ended": removed.board_sessions_ended,
                    "teams_left": removed.teams_left,
                    "endpoints_revoked": removed.endpoints_revoked,
                    "leases_released": removed.leases_released,
                    "released_todo_ids": removed.released_todo_ids,
                }))
            })
            .await
        }
    }
}

/// `switchboard admin team add` and `admin team member add|remove`.
async fn run_team(command: TeamCommand) -> Result<(), String> {
    match command {
        TeamCommand::Add { name, owner, database } => {
            with_database(database, |store| async move {
                let team = store.bootstrap_team(&name, &owner).await.map_err(|e| e.to_string())?;
                Ok(json!({ "team_id": team.id, "slug": team.slug, "name": team.name }))
            })
            .await
        }
        TeamCommand::Member { command: MemberCommand::Add { team, human, role, database } } => {
            with_database(database, |store| async move {
                let role = TeamRole::parse("role", &role).map_err(|e| e.to_string())?;
                let (team, human) = store.bootstrap_member(&team, &human, role).await.map_err(|e| e.to_string())?;
                Ok(json!({ "team_id": team.id, "human_id": human.id, "role": role.as_str() }))
            })
            .await
        }
        TeamCommand::Member { command: MemberCommand::Remove { team, human, database } } => {
            with_database(database, |store| async move {
                let removed = store.remove_member(&team, &human).await.map_err(|e| e.to_string())?;
                Ok(json!({
                    "team_id": removed.team_id,
                    "human_id": removed.human_id,
                    "role": removed.role,
                    "removed": true,
                    "leases_released": removed.leases_released,
                    "released_todo_ids": removed.released_todo_ids,
                }))
            })
            .await
        }
    }
}

/// Runs a one-shot command against the database (migrated first), prints its JSON answer, and
/// stops an embedded PostgreSQL it had to start.
async fn with_database<F, Fut>(database: DatabaseArgs, work: F) -> Result<(), String>
where
    F: FnOnce(PgStore) -> Fut,
    Fut: std::future::Future<Output = Result<serde_json::Value, String>>,
{
    with_database_text(database, |store| async move { work(store).await.map(|answer| answer.to_string()) }).await
}

/// As `with_database`, printing a line of text (`admin login-link` prints just the URL).
async fn with_database_text<F, Fut>(database: DatabaseArgs, work: F) -> Result<(), String>
where
    F: FnOnce(PgStore) -> Fut,
    Fut: std::future::Future<Output = Result<String, String>>,
{
    let target = database::resolve(database.database_url, &database.data_dir).await?;
    let settings = PoolSettings { connections_max: 1, ..PoolSettings::default() };
    let store = PgStore::connect(target.url(), settings, Arc::new(SystemClock))
        .await
        .map_err(|e| format!("cannot connect to the database: {e}"))?;
    let outcome = match store.migrate().await {
        Ok(()) => work(store.clone()).await,
        Err(error) => Err(format!("migrations failed: {error}")),
    };
    if let Target::Embedded { embedded, .. } = target {
        embedded.stop_if_unused(store.pool()).await;
    } else {
        store.pool().close().await;
    }
    let answer = outcome?;
    println!("{answer}");
    Ok(())
}
