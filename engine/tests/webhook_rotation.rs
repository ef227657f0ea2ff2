//! Webhook secret rotation on real PostgreSQL (issue #14): the replaced secret is offered to
//! ingest for verification during its grace, on the store's clock, and never after it.

mod support;

use chrono::Duration;
use models::limits::WEBHOOK_SECRET_GRACE_SECONDS;
use models::store::PreviousSecret;
use models::store::prelude::*;
use support::{World, granted};

// Issue #14
#[tokio::test]
async fn a_rotated_webhook_secret_is_offered_for_verification_until_its_grace_ends() {
    let world = World::new().await;
    let alice = world.human("alice").await;
    let agent = world.agent(&alice, &["inbox"]).await;
    let owner = alice.human.id.clone();
    let hook = world.store.create_webhook(&owner, "provider", "old", &granted(&agent)).await.expect("webhook");
    let route = || async { world.store.webhook_for_ingest_unscoped(&hook).await.expect("read").expect("webhook") };
    assert_eq!(route().await.previous_secret, None, "a new webhook has no previous secret");

    let rotated_at = models::store::Clock::now(&world.clock);
    world.store.rotate_webhook_secret(&owner, &hook, "new").await.expect("rotate");
    let expires_at = rotated_at + Duration::seconds(WEBHOOK_SECRET_GRACE_SECONDS);
    let offered = route().await;
    assert_eq!(offered.secret, "new");
    assert_eq!(offered.previous_secret, Some(PreviousSecret { secret: "old".into(), expires_at }));

    world.clock.advance(Duration::seconds(WEBHOOK_SECRET_GRACE_SECONDS - 1));
    assert!(route().await.previous_secret.is_some(), "one second before the end the old secret still verifies");
    world.clock.advance(Duration::seconds(1));
    let after = route().await;
    assert_eq!(after.previous_secret, None, "from the grace's end the old secret is no longer offered");
    assert_eq!(after.secret, "new");
}

// Issue #14
#[tokio::test]
async fn rotating_again_replaces_the_previous_secret_and_deleting_ends_both() {
    let world = World::new().await;
    let alice = world.human("alice").await;
    let agent = world.agent(&alice, &["inbox"]).await;
    let owner = alice.human.id.clone();
    let hook = world.store.create_webhook(&owner, "provider", "first", &granted(&agent)).await.expect("webhook");
    world.store.rotate_webhook_secret(&owner, &hook, "second").await.expect("rotate");
    world.clock.advance(Duration::hours(1));
    world.store.rotate_webhook_secret(&owner, &hook, "third").await.expect("rotate again");
    let route = world.store.webhook_for_ingest_unscoped(&hook).await.expect("read").expect("webhook");
    assert_eq!(route.secret, "third");
    let previous = route.previous_secret.expect("in grace");
    assert_eq!(previous.secret, "second", "the first secret no longer verifies");
    assert_eq!(
        previous.expires_at,
        PreviousSecret::grace_end(models::store::Clock::now(&world.clock)),
        "the grace restarts"
    );

    world.store.delete_webhook(&owner, &hook).await.expect("delete");
    assert_eq!(world.store.webhook_for_ingest_unscoped(&hook).await.expect("read"), None);
}
