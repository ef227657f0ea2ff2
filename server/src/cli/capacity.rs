//! `switchboard system queue-capacity show|set N` over `/api/v1/system/queue-capacity`: the
//! install-wide intake capacity (intake-capacity.md), the most pending todos one queue may hold.
//!
//! `show` sets the configured value beside the effective one and its source, because the two
//! differ whenever `SWITCHBOARD_QUEUE_MAX_PENDING` overrides (and locks) the setting; it names
//! that variable when it does, so the operator knows where to change it. Both commands repeat
//! that lowering the capacity never removes waiting todos. The server validates every value.

use super::client::{Api, Failure};
use super::render::Table;
use crate::wire_types::CapacityBody;
use models::capacity::CAPACITY_ENV;
use reqwest::Method;
use serde_json::json;

/// What a lowered capacity does and does not do, shown under every answer.
const LOWERING_NOTE: &str = "Lowering the capacity never removes waiting todos: it only refuses new ones\n\
    (queue_full) until a queue holds fewer pending todos than the capacity.";

pub async fn show(api: &Api, json: bool) -> Result<(), Failure> {
    api.send_and_show((Method::GET, capacity_url(api), None), json, |answer| capacity_text(&answer)).await
}

/// `set N`: persists the install setting; the server refuses it while the environment locks it.
pub async fn set(api: &Api, max_pending: i64, json: bool) -> Result<(), Failure> {
    let body = json!({ "max_pending_per_queue": max_pending });
    let request = (Method::PATCH, capacity_url(api), Some(&body));
    api.send_and_show(request, json, |answer| {
        format!("queue capacity set to {}\n\n{}", amount(max_pending), capacity_text(&answer))
    })
    .await
}

fn capacity_url(api: &Api) -> reqwest::Url {
    api.url(&["system", "queue-capacity"], &[])
}

/// The answer `{setting: {max_pending_per_queue}, effective: {max_pending_per_queue, source,
/// locked}}` as a one-row table and what it means.
fn capacity_text(answer: &CapacityBody) -> String {
    let effective = &answer.effective;
    let locked = effective.locked;
    let mut table = Table::new(&["CONFIGURED", "EFFECTIVE", "SOURCE", "LOCKED"]);
    table.row(vec![
        answer.setting.max_pending_per_queue.map_or("not set".into(), amount),
        amount(effective.max_pending_per_queue),
        effective.source.clone(),
        if locked { format!("yes, by {CAPACITY_ENV}") } else { "no".into() },
    ]);
    let mut out = format!("max pending todos per queue\n{}\n", table.render());
    if locked {
        out.push_str(&format!(
            "Locked by {CAPACITY_ENV} in the server's environment: `set` is refused\n\
             until that variable is unset and the server restarted.\n"
        ));
    }
    out.push_str(LOWERING_NOTE);
    out.push('\n');
    out
}

/// A capacity as a person reads it: 0 is unlimited.
fn amount(value: i64) -> String {
    match value {
        0 => "unlimited (0)".into(),
        n => n.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn show_sets_configured_beside_effective_with_source() {
        let answer = json!({"setting": {"max_pending_per_queue": 5},
                            "effective": {"max_pending_per_queue": 5, "source": "setting", "locked": false}});
        let shown = capacity_text(&serde_json::from_value(answer).expect("a capacity answer"));
        let row = shown.lines().nth(2).expect("one row");
        assert_eq!(row.split_whitespace().collect::<Vec<_>>(), ["5", "5", "setting", "no"], "{shown}");
        assert!(shown.contains("never removes waiting todos"), "{shown}");
        assert!(!shown.contains("Locked by"), "{shown}");
    }

    #[test]
    fn the_default_reads_as_unlimited_and_an_unset_setting_as_not_set() {
        let answer = json!({"setting": {"max_pending_per_queue": null},
                            "effective": {"max_pending_per_queue": 0, "source": "default", "locked": false}});
        let shown = capacity_text(&serde_json::from_value(answer).expect("a capacity answer"));
        let row = shown.lines().nth(2).expect("one row");
        assert!(row.starts_with("not set") && row.contains("unlimited (0)") && row.contains("default"), "{shown}");
    }

    #[test]
    fn a_locked_capacity_names_the_variable_that_locks_it() {
        let answer = json!({"setting": {"max_pending_per_queue": 6},
                            "effective": {"max_pending_per_queue": 20, "source": "environment", "locked": true}});
        let shown = capacity_text(&serde_json::from_value(answer).expect("a capacity answer"));
        let row = shown.lines().nth(2).expect("one row");
        assert!(row.contains("yes, by SWITCHBOARD_QUEUE_MAX_PENDING"), "{shown}");
        assert!(row.starts_with("6 ") && row.contains(" 20 ") && row.contains("environment"), "{shown}");
        assert!(shown.contains("Locked by SWITCHBOARD_QUEUE_MAX_PENDING"), "{shown}");
        assert!(shown.contains("never removes waiting todos"), "{shown}");
    }
}
