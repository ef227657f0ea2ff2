//! Rebuilds the engine when a migration is added. `sqlx::migrate!` embeds the files of
//! `migrations/` and tracks each file it read, but not the directory, so a new migration alone
//! would leave a stale build that never applies it.

fn main() {
    println!("cargo:rerun-if-changed=../migrations");
}
