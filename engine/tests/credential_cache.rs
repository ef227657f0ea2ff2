//! Issue #31 item 3: endpoint credentials answered from each replica's cache, with a revocation
//! seen on every replica before its call returns (`engine/src/pg_store/credential_cache.rs`).
//! Two stores with their own pools and caches on one database are two replicas.

mod support;

use engine::PgStore;
use engine::pg_store::credential_cache::spawn_keeper;
use engine::pg_store::{hash_token, new_token};
use models::scope::HumanScope;
use models::store::AgentLookup;
use models::store::prelude::*;
use support::World;
use tokio::sync::watch;

/// A serving replica: a store with a cache, and its keeper holding the lease.
struct Replica {
    store: PgStore,
    keeper: tokio::task::JoinHandle<()>,
    _shutdown: watch::Sender<bool>,
}

impl Replica {
    async fn start(world: &World, name: &str) -> Replica {
        let store = World::store_on(&world.db, &world.clock).await.with_credential_cache(name);
        let (shutdown, stop) = watch::channel(false);
        let keeper = spawn_keeper(store.clone(), stop);
        let replica = Replica { store, keeper, _shutdown: shutdown };
        replica.wait_for_lease().await;
        replica
    }

    /// Until the keeper's first renewal: the lease is there once a renewal says so.
    async fn wait_for_lease(&self) {
        for _ in 0..500 {
            let leased: bool = sqlx::query_scalar(
                "SELECT EXISTS (SELECT 1 FROM credential_replicas WHERE replica_id = $1 AND lease_until > now())",
            )
            .bind(self.cache().replica_id())
            .fetch_one(self.store.pool())
            .await
            .expect("lease read");
            if leased {
                // The row is written before the replica counts its lease: renew once more here.
                self.store.renew_credential_lease().await.expect("renew");
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        panic!("the keeper never took its lease");
    }

    fn cache(&self) -> &engine::pg_store::credential_cache::CredentialCache {
        self.store.credential_cache().expect("a replica has a cache")
    }

    async fn lookup(&self, slug: &str, token: &str) -> AgentLookup {
        self.store.agent_by_token(slug, &hash_token(token)).await.expect("lookup")
    }

    /// Looks the credential up (filling the cache), then checks the cache answers it alone. The
    /// renewal first applies the epoch the vend moved on, which the keeper may not have yet.
    async fn warm(&self, slug: &str, token: &str) {
        self.store.renew_credential_lease().await.expect("renew");
        assert!(matches!(self.lookup(slug, token).await, AgentLookup::Found(_)), "{slug} is found");
        assert!(
            matches!(self.cache().lookup(slug, &hash_token(token)), Some(AgentLookup::Found(_))),
            "the cache answers {slug} once read"
        );
    }
}

async fn vend(world: &World, owner: &HumanScope, team_queues: &[(&str, &str)]) -> (String, String, String) {
    let (endpoint, token) = world.vend(owner, &["inbox"], team_queues).await;
    (endpoint.id, endpoint.slug, token)
}

// Issue #31 item 3: a revoked credential's very next request is refused, on any replica. Both
// replicas answer from their caches; the revocation goes through one of them, alternately, and
// returns only once both have dropped the credential. A rotation likewise refuses the old key
// everywhere and admits the new one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revoked_or_rotated_credential_is_refused_at_once_on_every_replica() {
    let world = World::new().await;
    let replicas = [Replica::start(&world, "rp_a").await, Replica::start(&world, "rp_b").await];
    let alice = world.human("alice").await;
    let (id, slug, mut token) = vend(&world, &alice, &[]).await;
    for round in 0..6 {
        let (writer, other) = (&replicas[round % 2], &replicas[(round + 1) % 2]);
        for replica in &replicas {
            replica.warm(&slug, &token).await;
        }
        if round % 2 == 0 {
            writer.store.revoke_endpoint(&id).await.expect("revoke");
            for replica in [writer, other] {
                assert!(matches!(replica.lookup(&slug, &token).await, AgentLookup::Unknown), "round {round}: revoked");
            }
        }
        let rotated = new_token("sbk_");
        writer.store.rotate_endpoint(&id, &hash_token(&rotated)).await.expect("rotate");
        for replica in [other, writer] {
            assert!(matches!(replica.lookup(&slug, &token).await, AgentLookup::Unknown), "round {round}: old key");
            assert!(matches!(replica.lookup(&slug, &rotated).await, AgentLookup::Found(_)), "round {round}: new key");
        }
        token = rotated;
    }
    for replica in &replicas {
        replica.keeper.abort();
    }
}

// Rule 3 step by step: a replica that has not applied a revocation still answers the credential
// from its cache, so the revocation does not return until that replica has applied it. Here the
// replica renews by hand (no keeper, no notification), so nothing but the writer's wait stands
// between the revocation and a stale answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revocation_waits_until_every_leased_replica_has_applied_it() {
    let world = World::new().await;
    let writer = Replica::start(&world, "rp_a").await;
    let manual = World::store_on(&world.db, &world.clock).await.with_credential_cache("rp_manual");
    let alice = world.human("alice").await;
    let (id, slug, token) = vend(&world, &alice, &[]).await;
    manual.renew_credential_lease().await.expect("lease");
    assert!(matches!(manual.agent_by_token(&slug, &hash_token(&token)).await, Ok(AgentLookup::Found(_))));
    let cache = manual.credential_cache().expect("cache");
    assert!(matches!(cache.lookup(&slug, &hash_token(&token)), Some(AgentLookup::Found(_))), "cached");

    let revoking = tokio::spawn({
        let store = writer.store.clone();
        async move { store.revoke_endpoint(&id).await }
    });
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    let lease_live: bool = sqlx::query_scalar(
        "SELECT lease_until > clock_timestamp() FROM credential_replicas WHERE replica_id = 'rp_manual'",
    )
    .fetch_one(world.store.pool())
    .await
    .expect("lease read");
    assert!(lease_live, "the replica renewed 200 ms ago; its lease is live");
    assert!(!revoking.is_finished(), "the revocation returned while a leased replica had not applied it");
    assert!(
        matches!(cache.lookup(&slug, &hash_token(&token)), Some(AgentLookup::Found(_))),
        "meanwhile the replica's cache still holds the credential"
    );
    manual.renew_credential_lease().await.expect("renew applies the epoch");
    revoking.await.expect("task").expect("the revocation returns once the replica applied it");
    assert!(matches!(manual.agent_by_token(&slug, &hash_token(&token)).await, Ok(AgentLookup::Unknown)));
    manual.release_credential_lease().await;
}

// A change to what a credential reaches (here: its owner leaves the team whose queue it was
// granted) is seen on every replica before the removal returns, as a revocation is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_removed_from_a_team_loses_the_team_queue_on_every_replica() {
    let world = World::new().await;
    let replicas = [Replica::start(&world, "rp_a").await, Replica::start(&world, "rp_b").await];
    world.store.bootstrap_human("tess", false).await.expect("team owner");
    let alice = world.human("alice").await;
    let team = world.store.bootstrap_team("ops", "tess").await.expect("team");
    world.store.bootstrap_member("ops", "alice", models::scope::TeamRole::Member).await.expect("member");
    let (_, slug, token) = vend(&world, &alice, &[(&team.id, "shared")]).await;
    let granted = |lookup: AgentLookup| match lookup {
        AgentLookup::Found(agent) => agent.granted.iter().any(|identity| identity.queue == "shared"),
        other => panic!("{other:?}"),
    };
    for replica in &replicas {
        replica.warm(&slug, &token).await;
        assert!(granted(replica.lookup(&slug, &token).await), "the team queue is granted while alice is a member");
    }
    replicas[0].store.remove_member("ops", "alice").await.expect("remove member");
    for replica in replicas.iter().rev() {
        assert!(!granted(replica.lookup(&slug, &token).await), "the team queue is gone on every replica");
    }
}

// Rule 2 of the cache: a replica that stops renewing (its keeper gone, as when it is cut off
// from the database) neither holds the writer forever nor keeps answering from its cache. The
// revocation returns once the silent replica's lease has lapsed, and that replica, whose own
// count of the lease ran out first, reads the database and refuses.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_that_stops_renewing_stops_answering_from_its_cache() {
    let world = World::new().await;
    let mut replicas = [Replica::start(&world, "rp_a").await, Replica::start(&world, "rp_b").await];
    let alice = world.human("alice").await;
    let (id, slug, token) = vend(&world, &alice, &[]).await;
    for replica in &replicas {
        replica.warm(&slug, &token).await;
    }
    // Silenced without giving up its lease: no renewal, no notification applied.
    replicas[1].keeper.abort();
    let _ = (&mut replicas[1].keeper).await;
    replicas[0].store.revoke_endpoint(&id).await.expect("the revocation returns once the replica is silent");
    assert!(replicas[1].cache().applied_epoch() < current_epoch(&world).await, "the silent replica never applied it");
    assert!(replicas[1].cache().lookup(&slug, &hash_token(&token)).is_none(), "its lapsed lease answers nothing");
    assert!(matches!(replicas[1].lookup(&slug, &token).await, AgentLookup::Unknown), "it reads the database");
}

// Without a cache (every store but a serving replica's) nothing changes: each look-up reads the
// database, and a writer with no replica holding a lease does not wait.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_without_a_cache_reads_every_credential_and_does_not_wait() {
    let world = World::new().await;
    assert!(world.store.credential_cache().is_none());
    let alice = world.human("alice").await;
    let (id, slug, token) = vend(&world, &alice, &[]).await;
    assert!(matches!(world.store.agent_by_token(&slug, &hash_token(&token)).await, Ok(AgentLookup::Found(_))));
    world.store.revoke_endpoint(&id).await.expect("revoke");
    assert!(matches!(world.store.agent_by_token(&slug, &hash_token(&token)).await, Ok(AgentLookup::Unknown)));
}

// Every change that ends or narrows a credential through the store, made on one replica, is
// seen on the other at once: an endpoint deleted, its owner removed, and a role that changes
// what the endpoint manages.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deletions_removals_and_role_changes_are_seen_on_every_replica() {
    let world = World::new().await;
    let replicas = [Replica::start(&world, "rp_a").await, Replica::start(&world, "rp_b").await];
    let alice = world.human("alice").await;
    let (_, deleted_slug, deleted_token) = vend(&world, &alice, &[]).await;
    for replica in &replicas {
        replica.warm(&deleted_slug, &deleted_token).await;
    }
    let reference = models::identity::ScopeRef::Endpoint(deleted_slug.clone());
    let alice = world.human_scope_of(&alice).await;
    replicas[0].store.delete_endpoint(&alice, &reference).await.expect("delete endpoint");
    assert!(matches!(replicas[1].lookup(&deleted_slug, &deleted_token).await, AgentLookup::Unknown), "deleted");

    world.store.bootstrap_human("tess", false).await.expect("team owner");
    let team = world.store.bootstrap_team("ops", "tess").await.expect("team");
    world.store.bootstrap_member("ops", "alice", models::scope::TeamRole::Member).await.expect("member");
    let (_, slug, token) = vend(&world, &alice, &[]).await;
    let manages_team = |lookup: AgentLookup| match lookup {
        AgentLookup::Found(agent) => agent.manages.team_ids.contains(&team.id),
        other => panic!("{other:?}"),
    };
    for replica in &replicas {
        replica.warm(&slug, &token).await;
        assert!(!manages_team(replica.lookup(&slug, &token).await), "a member configures nothing");
    }
    replicas[0].store.bootstrap_member("ops", "alice", models::scope::TeamRole::Admin).await.expect("promote");
    assert!(manages_team(replicas[1].lookup(&slug, &token).await), "an admin's endpoint manages the team");

    replicas[1].warm(&slug, &token).await;
    replicas[0].store.remove_human("alice").await.expect("remove alice");
    assert!(matches!(replicas[1].lookup(&slug, &token).await, AgentLookup::Unknown), "a removed human's key");
}

// Rule 2's renewal is atomic against writers: a change committing while a renewal runs is
// either read by it or waits for it, so no change commits between the renewal's read of the
// epoch and the lease it records (which would let a lapsed replica return with a stale cache
// after the writer found nobody to wait for).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_renewal_reads_a_change_committing_meanwhile_not_the_epoch_before_it() {
    let world = World::new().await;
    let replica = Replica::start(&world, "rp_a").await;
    let mut writer = world.store.pool().begin().await.expect("writer");
    let bumped: i64 = sqlx::query_scalar("UPDATE credential_epoch SET epoch = epoch + 1 RETURNING epoch")
        .fetch_one(&mut *writer)
        .await
        .expect("bump");
    let renewing = tokio::spawn({
        let store = replica.store.clone();
        async move { store.renew_credential_lease().await }
    });
    // Until the renewal either waits on the change's row lock or (wrongly) finishes without it.
    for _ in 0..2_000 {
        let waiting: bool = sqlx::query_scalar(
            "SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE datname = current_database() \
               AND wait_event_type = 'Lock' AND query LIKE '%FROM credential_epoch FOR SHARE%')",
        )
        .fetch_one(world.store.pool())
        .await
        .expect("activity");
        if waiting || renewing.is_finished() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    writer.commit().await.expect("commit");
    renewing.await.expect("task").expect("renewal");
    assert_eq!(replica.cache().applied_epoch(), bumped, "the renewal waited for the change and applied it");
}

// A database that went back in time (a restore, a failover that lost commits) has a lower
// epoch than a replica applied: the renewal then trusts nothing it cached.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_epoch_that_went_back_empties_the_cache() {
    let world = World::new().await;
    let replica = Replica::start(&world, "rp_a").await;
    let alice = world.human("alice").await;
    let (_, slug, token) = vend(&world, &alice, &[]).await;
    replica.warm(&slug, &token).await;
    let applied = replica.cache().applied_epoch();
    sqlx::query("UPDATE credential_epoch SET epoch = 1").execute(world.store.pool()).await.expect("rewind");
    replica.store.renew_credential_lease().await.expect("renew");
    assert_eq!(replica.cache().applied_epoch(), 1, "the database's epoch is taken as it is (was {applied})");
    assert!(replica.cache().lookup(&slug, &hash_token(&token)).is_none(), "nothing cached before is trusted");
    replica.warm(&slug, &token).await;
}

// Rule 1: every table the look-up reads moves the epoch on, in the writer's transaction, so a
// change made by any statement, not only the store's own, invalidates the caches.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_table_the_look_up_reads_moves_the_epoch_on() {
    let world = World::new().await;
    let alice = world.human("alice").await;
    let (id, _, _) = vend(&world, &alice, &[]).await;
    let human = &alice.human.id;
    let statements = [
        format!("UPDATE endpoints SET verbs = verbs WHERE id = '{id}'"),
        format!("UPDATE endpoints SET revoked = false WHERE id = '{id}'"),
        format!("UPDATE endpoints SET token_hash = token_hash, slug = slug WHERE id = '{id}'"),
        format!(
            "UPDATE endpoints SET owner_human_id = owner_human_id, owner_team_id = owner_team_id WHERE id = '{id}'"
        ),
        format!("UPDATE endpoints SET created_by_human_id = created_by_human_id WHERE id = '{id}'"),
        format!("INSERT INTO endpoint_grants (endpoint_id, queue) VALUES ('{id}', 'more')"),
        format!("UPDATE endpoint_grants SET queue = 'most' WHERE endpoint_id = '{id}' AND queue = 'more'"),
        format!("DELETE FROM endpoint_grants WHERE endpoint_id = '{id}' AND queue = 'most'"),
        "INSERT INTO teams (id, slug, name) VALUES ('tm_x', 'x', 'x')".to_string(),
        format!("INSERT INTO team_members (team_id, human_id, role) VALUES ('tm_x', '{human}', 'member')"),
        format!("UPDATE team_members SET role = 'admin' WHERE team_id = 'tm_x' AND human_id = '{human}'"),
        "UPDATE teams SET name = 'y' WHERE id = 'tm_x'".to_string(),
        "DELETE FROM teams WHERE id = 'tm_x'".to_string(),
        format!("DELETE FROM endpoints WHERE id = '{id}'"),
    ];
    for statement in statements {
        let before = current_epoch(&world).await;
        sqlx::raw_sql(sqlx::AssertSqlSafe(statement.clone())).execute(world.store.pool()).await.expect("statement");
        assert!(current_epoch(&world).await > before, "{statement} moves the epoch on");
    }
    // A cascade from a table the look-up does not read counts too: the endpoints go with it.
    let bob = world.human("bob").await;
    vend(&world, &bob, &[]).await;
    let before = current_epoch(&world).await;
    sqlx::query("DELETE FROM humans WHERE id = $1")
        .bind(&bob.human.id)
        .execute(world.store.pool())
        .await
        .expect("delete");
    assert!(current_epoch(&world).await > before, "a cascade from humans moves the epoch on");
    let before = current_epoch(&world).await;
    sqlx::query("UPDATE endpoints SET presence_seen = now()").execute(world.store.pool()).await.expect("presence");
    assert_eq!(current_epoch(&world).await, before, "presence bookkeeping does not empty the caches");
}

async fn current_epoch(world: &World) -> i64 {
    sqlx::query_scalar("SELECT epoch FROM credential_epoch").fetch_one(world.store.pool()).await.expect("epoch")
}
