//! `switchboard queue budget show|set|clear` (SPEC-0030 REQ-10) over `/api/v1/admission`, and
//! the tables that show a budget the way REQ-11 asks: used of the window limit, in flight of the
//! in-flight limit, the status, and "resets at" in the policy's zone and the viewer's.
//!
//! The server validates every policy; this file only shapes the full-replace body from flags.

use super::SetArgs;
use super::client::{Api, Failure};
use super::render::{Table, Viewer, emit, in_zone, instant, one_line, ratio, text};
use chrono_tz::Tz;
use reqwest::Method;
use serde_json::{Value, json};

/// `show`: every budget the caller manages, those of one scope, or one queue in detail.
pub async fn show(api: &Api, scope: Option<String>, queue: Option<String>, json: bool) -> Result<(), Failure> {
    let viewer = Viewer::from_env();
    if let (Some(scope), Some(queue)) = (&scope, &queue) {
        let url = api.url(&["admission", scope, queue], &[]);
        let (raw, detail) = api.send_json(Method::GET, url, None).await?;
        emit(&if json { raw } else { detail_text(&detail, viewer) });
        return Ok(());
    }
    let (raw, listed) = api.send_json(Method::GET, api.url(&["admission"], &[]), None).await?;
    let policies = listed.get("policies").and_then(Value::as_array).cloned().unwrap_or_default();
    let Some(scope) = scope else {
        emit(&if json { raw } else { list_text(&policies, viewer, None) });
        return Ok(());
    };
    // The list names scopes by id; SCOPE may be a slug, so learn the id it stands for.
    let aliases = scope_aliases(api, &scope).await;
    let kept: Vec<Value> = policies
        .into_iter()
        .filter(|entry| entry.get("scope").and_then(Value::as_str).is_some_and(|s| aliases.iter().any(|a| a == s)))
        .collect();
    emit(&if json { json!({ "policies": kept }).to_string() } else { list_text(&kept, viewer, Some(&scope)) });
    Ok(())
}

/// `set`: a full replace. Limits not named become null; a window exists only with a per-* limit.
pub async fn set(api: &Api, args: SetArgs, json: bool) -> Result<(), Failure> {
    let body = policy_body(&args);
    let url = api.url(&["admission", &args.scope, &args.queue], &[]);
    let (raw, saved) = api.send_json(Method::PUT, url, Some(&body)).await?;
    if json {
        emit(&raw);
    } else {
        let name = format!("{}/{}", args.scope, args.queue);
        emit(&format!("budget of {name} replaced\n\n{}", detail_text(&saved, Viewer::from_env())));
    }
    Ok(())
}

/// `clear`: removes the policy; the server keeps its audit history.
pub async fn clear(api: &Api, scope: &str, queue: &str, json: bool) -> Result<(), Failure> {
    let raw = api.send(Method::DELETE, api.url(&["admission", scope, queue], &[]), None).await?;
    if json {
        // 204 has no body; print whatever came, which is the API body verbatim.
        if !raw.is_empty() {
            emit(&raw);
        }
    } else {
        emit(&format!("budget of {scope}/{queue} cleared; its audit history stays readable"));
    }
    Ok(())
}

/// The PUT body of contract §3: `{max_in_flight, max_claims_per_window, window}`, and with
/// `--per-minute` beside another per-* limit, issue #52's `additional_windows`.
fn policy_body(args: &SetArgs) -> Value {
    let per = [("hour", args.per_hour), ("day", args.per_day), ("week", args.per_week)];
    let windowed = per.iter().find_map(|(period, limit)| limit.map(|limit| (*period, limit)));
    if windowed.is_none()
        && let Some(limit) = args.per_minute
    {
        return json!({
            "max_in_flight": args.max_in_flight,
            "max_claims_per_window": limit,
            "window": {"period": "minute"},
        });
    }
    let window = windowed.map(|(period, _)| {
        let mut window = json!({
            "period": period,
            "tz": args.tz.as_deref().unwrap_or("UTC"),
            "start": args.start.as_deref().unwrap_or("00:00"),
        });
        if let (Some(weekday), Some(map)) = (&args.weekday, window.as_object_mut()) {
            map.insert("weekday".into(), json!(weekday));
        }
        window
    });
    let mut body = json!({
        "max_in_flight": args.max_in_flight,
        "max_claims_per_window": windowed.map(|(_, limit)| limit),
        "window": window,
    });
    if let (Some(limit), Some(map)) = (args.per_minute, body.as_object_mut()) {
        map.insert("additional_windows".into(), json!([{"max_claims": limit, "window": {"period": "minute"}}]));
    }
    body
}

/// Every string the list may use for SCOPE: as written, and `kind:<id>` when SCOPE names a slug
/// of an endpoint or team the caller can see. A failed lookup leaves only the written form: the
/// list itself was already answered, and an exact id still matches.
async fn scope_aliases(api: &Api, scope: &str) -> Vec<String> {
    let mut aliases = vec![scope.to_string()];
    let Some((kind, reference)) = scope.split_once(':') else { return aliases };
    let (route, key) = match kind {
        "endpoint" => ("endpoints", "endpoints"),
        "team" => ("teams", "teams"),
        _ => return aliases,
    };
    if let Ok((_, listed)) = api.send_json(Method::GET, api.url(&[route], &[]), None).await {
        for item in listed.get(key).and_then(Value::as_array).into_iter().flatten() {
            let field = |name: &str| item.get(name).and_then(Value::as_str);
            if let Some(id) = field("id").filter(|id| *id == reference || field("slug") == Some(reference)) {
                aliases.push(format!("{kind}:{id}"));
            }
        }
    }
    aliases
}

/// The zone a policy's window follows, when it has a window the CLI's zone table knows.
fn policy_zone(entry: &Value) -> Option<Tz> {
    entry.pointer("/policy/window/tz").and_then(Value::as_str).and_then(|tz| tz.parse().ok())
}

/// "resets at" on the policy's wall clock; UTC (said so) if the zone is unknown to this build.
fn resets_in_policy_zone(entry: &Value) -> String {
    let Some(resets) = instant(entry.pointer("/status/window_resets_at")) else { return "-".into() };
    match policy_zone(entry) {
        Some(tz) => in_zone(resets, tz),
        None => in_zone(resets, Tz::UTC),
    }
}

fn resets_locally(entry: &Value, viewer: Viewer) -> String {
    instant(entry.pointer("/status/window_resets_at")).map_or("-".into(), |resets| viewer.format(resets))
}

/// One line per budget: the REQ-11 header of each queue, as a table.
fn list_text(policies: &[Value], viewer: Viewer, scope: Option<&str>) -> String {
    if policies.is_empty() {
        return match scope {
            Some(scope) => format!("no budgets you manage in {scope}"),
            None => "no budgets you manage; set one with `switchboard queue budget set SCOPE QUEUE --per-day N`".into(),
        };
    }
    let mut table = Table::new(&[
        "SCOPE",
        "QUEUE",
        "STATUS",
        "USED",
        "IN FLIGHT",
        "PENDING",
        "ZONE",
        "RESETS AT (ZONE)",
        "RESETS AT (LOCAL)",
    ]);
    for entry in policies {
        let status = entry.get("status");
        let field = |name: &str| status.and_then(|s| s.get(name));
        table.row(vec![
            text(entry.get("scope")),
            text(entry.get("queue")),
            text(field("status")),
            ratio(field("used"), field("max_claims_per_window")),
            ratio(field("in_flight"), field("max_in_flight")),
            text(entry.get("pending")),
            text(entry.pointer("/policy/window/tz")),
            resets_in_policy_zone(entry),
            resets_locally(entry, viewer),
        ]);
    }
    table.render()
}

/// One budget in full: the header lines, then recent windows and the audit tail when present.
fn detail_text(entry: &Value, viewer: Viewer) -> String {
    let field = |name: &str| entry.pointer(&format!("/status/{name}"));
    let count = |name: &str| field(name).and_then(Value::as_i64);
    let mut lines: Vec<(&str, String)> = Vec::new();
    lines.push(("status", status_words(field("status").and_then(Value::as_str).unwrap_or("-"))));
    lines.push(("budget", entry.get("policy").map_or("-".into(), describe_policy)));
    lines.push((
        "used",
        match (count("used"), count("max_claims_per_window")) {
            (Some(used), Some(limit)) => {
                format!("{used} of {limit} this window ({} remaining)", count("remaining").unwrap_or(0))
            }
            (None, Some(limit)) => format!("unknown of {limit}"),
            _ => "no window limit".into(),
        },
    ));
    lines.push((
        "in flight",
        match (count("in_flight"), count("max_in_flight")) {
            (Some(in_flight), Some(limit)) => format!("{in_flight} of {limit}"),
            (Some(in_flight), None) => format!("{in_flight} (no in-flight limit)"),
            (None, Some(limit)) => format!("unknown of {limit}"),
            (None, None) => "-".into(),
        },
    ));
    if field("window_resets_at").is_some_and(|v| !v.is_null()) {
        let zone = entry.pointer("/policy/window/tz").and_then(Value::as_str).unwrap_or("UTC");
        lines.push(("resets at", format!("{} ({zone})", resets_in_policy_zone(entry))));
        lines.push(("", format!("{} (local)", resets_locally(entry, viewer))));
    }
    // Issue #52: each additional window's usage, and when the budget runs out at its rate.
    for window in field("windows").and_then(Value::as_array).into_iter().flatten().skip(1) {
        let period = window.pointer("/window/period").and_then(Value::as_str).unwrap_or("?");
        let used = window.get("used").and_then(Value::as_i64).unwrap_or(0);
        let max = window.get("max_claims").and_then(Value::as_i64).unwrap_or(0);
        lines.push(("also", format!("{used} of {max} this {period}")));
    }
    if let Some(forecast) = instant(field("forecast_exhausted_at")) {
        lines.push(("runs out", format!("at this rate, {}", viewer.format(forecast))));
    }
    if let Some(next) = instant(field("next_eligible_at")) {
        let how = if field("exact").and_then(Value::as_bool) == Some(true) { "exact" } else { "estimate" };
        lines.push(("next eligible", format!("{} ({how})", viewer.format(next))));
    }
    if let Some(pending) = entry.get("pending").filter(|p| !p.is_null()) {
        lines.push(("pending", text(Some(pending))));
    }
    let name = format!("{}/{}", text(entry.get("scope")), text(entry.get("queue")));
    let mut out = format!("{}\n", one_line(&name));
    for (label, value) in lines {
        out.push_str(&format!("  {label:<14} {}\n", one_line(&value)));
    }
    if let Some(windows) = entry.get("windows").and_then(Value::as_array).filter(|w| !w.is_empty()) {
        let zone = policy_zone(entry).unwrap_or(Tz::UTC);
        let mut table = Table::new(&["WINDOW START", "USED"]);
        for window in windows {
            let start = instant(window.get("window_start")).map_or("-".into(), |start| in_zone(start, zone));
            table.row(vec![start, text(window.get("used"))]);
        }
        out.push_str(&format!("\nrecent windows ({})\n{}", zone.name(), table.render()));
    }
    if let Some(audit) = entry.get("audit").and_then(Value::as_array).filter(|a| !a.is_empty()) {
        let mut table = Table::new(&["AT (LOCAL)", "ACTION", "BY", "BEFORE", "AFTER"]);
        for record in audit {
            let by = match record.get("actor_endpoint_id").and_then(Value::as_str) {
                Some(endpoint) => format!("{} via {endpoint}", text(record.get("actor_human_id"))),
                None => text(record.get("actor_human_id")),
            };
            table.row(vec![
                instant(record.get("at")).map_or("-".into(), |at| viewer.format(at)),
                text(record.get("action")),
                by,
                record.get("before").map_or("-".into(), describe_policy),
                record.get("after").map_or("-".into(), describe_policy),
            ]);
        }
        out.push_str(&format!("\naudit\n{}", table.render()));
    }
    out
}

/// The status word, with what it means for the next claim.
fn status_words(status: &str) -> String {
    let meaning = match status {
        "admitted" => return "admitted".into(),
        "window_exhausted" => "the window's claims are used up",
        "in_flight_full" => "as many claims in flight as allowed",
        "paused" => "a limit is 0",
        "admission_unavailable" => "the policy cannot be evaluated, so claims are refused",
        _ => return status.into(),
    };
    format!("{status} ({meaning})")
}

/// A policy in one line: `100/day from 00:00 America/Los_Angeles; 5 in flight`. Null is `-`.
fn describe_policy(policy: &Value) -> String {
    if policy.is_null() {
        return "-".into();
    }
    let mut parts = Vec::new();
    if let Some(limit) = policy.get("max_claims_per_window").and_then(Value::as_i64) {
        let window = policy.get("window");
        let part = |name: &str| window.and_then(|w| w.get(name)).and_then(Value::as_str).unwrap_or("?");
        let start = part("start");
        let from = match part("period") {
            "minute" => String::new(),
            "hour" => format!(" from :{} {}", start.rsplit(':').next().unwrap_or(start), part("tz")),
            "week" => format!(" from {} {start} {}", part("weekday"), part("tz")),
            _ => format!(" from {start} {}", part("tz")),
        };
        parts.push(format!("{limit}/{}{from}", part("period")));
    }
    for additional in policy.get("additional_windows").and_then(Value::as_array).into_iter().flatten() {
        let limit = additional.get("max_claims").and_then(Value::as_i64).unwrap_or(0);
        let period = additional.pointer("/window/period").and_then(Value::as_str).unwrap_or("?");
        parts.push(format!("{limit}/{period}"));
    }
    if let Some(limit) = policy.get("max_in_flight").and_then(Value::as_i64) {
        parts.push(format!("{limit} in flight"));
    }
    if parts.is_empty() { "-".into() } else { parts.join("; ") }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(per_day: Option<u32>, per_week: Option<u32>, weekday: Option<&str>, in_flight: Option<u32>) -> SetArgs {
        SetArgs {
            scope: "endpoint:bot".into(),
            queue: "inbox".into(),
            per_minute: None,
            per_hour: None,
            per_day,
            per_week,
            tz: None,
            start: None,
            weekday: weekday.map(str::to_string),
            max_in_flight: in_flight,
        }
    }

    #[test]
    fn set_sends_a_full_replace_with_defaults_for_the_window() {
        assert_eq!(
            policy_body(&args(Some(100), None, None, None)),
            json!({"max_in_flight": null, "max_claims_per_window": 100,
                   "window": {"period": "day", "tz": "UTC", "start": "00:00"}})
        );
        assert_eq!(
            policy_body(&args(None, None, None, Some(2))),
            json!({"max_in_flight": 2, "max_claims_per_window": null, "window": null})
        );
        assert_eq!(
            policy_body(&args(None, Some(500), Some("Mon"), Some(3)))["window"],
            json!({"period": "week", "tz": "UTC", "start": "00:00", "weekday": "Mon"})
        );
    }

    fn entry() -> Value {
        json!({
            "scope": "endpoint:ep_1", "queue": "inbox", "pending": 12,
            "policy": {"max_in_flight": 5, "max_claims_per_window": 100,
                       "window": {"period": "day", "tz": "America/Los_Angeles", "start": "00:00"}},
            "status": {"status": "window_exhausted", "max_in_flight": 5, "in_flight": 2,
                       "max_claims_per_window": 100, "used": 100, "remaining": 0,
                       "window_start": "2026-03-09T07:00:00.000Z", "window_resets_at": "2026-03-10T07:00:00.000Z",
                       "next_eligible_at": "2026-03-10T07:00:00.000Z", "exact": true},
        })
    }

    // Issue #52: --per-minute beside a day is a second window; alone it is the window.
    #[test]
    fn ext52_per_minute_is_an_additional_window_beside_a_day_or_the_window_alone() {
        let both = SetArgs { per_minute: Some(60), ..args(Some(5000), None, None, None) };
        assert_eq!(
            policy_body(&both),
            json!({"max_in_flight": null, "max_claims_per_window": 5000,
                   "window": {"period": "day", "tz": "UTC", "start": "00:00"},
                   "additional_windows": [{"max_claims": 60, "window": {"period": "minute"}}]})
        );
        let alone = SetArgs { per_minute: Some(2), ..args(None, None, None, Some(1)) };
        assert_eq!(
            policy_body(&alone),
            json!({"max_in_flight": 1, "max_claims_per_window": 2, "window": {"period": "minute"}})
        );
        assert_eq!(describe_policy(&policy_body(&both)), "5000/day from 00:00 UTC; 60/minute");
    }

    // SPEC-0030 REQ-11: used of limit, in flight of limit, status, resets in both zones.
    #[test]
    fn req11_list_shows_counts_status_and_resets_in_both_zones() {
        let table = list_text(&[entry()], Viewer::Named(chrono_tz::America::New_York), None);
        let row = table.lines().nth(1).expect("one row");
        for expected in [
            "window_exhausted",
            "100/100",
            "2/5",
            "America/Los_Angeles",
            "2026-03-10 00:00 PDT",
            "2026-03-10 03:00 EDT",
        ] {
            assert!(row.contains(expected), "{expected} missing from {row}");
        }
    }

    // SPEC-0030 REQ-11
    #[test]
    fn req11_detail_reads_used_of_limit_and_both_reset_times() {
        let text = detail_text(&entry(), Viewer::Named(chrono_tz::Europe::Berlin));
        for expected in [
            "100 of 100 this window (0 remaining)",
            "2 of 5",
            "2026-03-10 00:00 PDT (America/Los_Angeles)",
            "2026-03-10 08:00 CET (local)",
            "100/day from 00:00 America/Los_Angeles; 5 in flight",
        ] {
            assert!(text.contains(expected), "{expected} missing from\n{text}");
        }
    }

    #[test]
    fn policies_read_as_one_line() {
        let hourly = json!({"max_in_flight": null, "max_claims_per_window": 10,
                            "window": {"period": "hour", "tz": "UTC", "start": "00:15"}});
        assert_eq!(describe_policy(&hourly), "10/hour from :15 UTC");
        let weekly = json!({"max_in_flight": null, "max_claims_per_window": 500,
                            "window": {"period": "week", "tz": "UTC", "start": "09:00", "weekday": "Mon"}});
        assert_eq!(describe_policy(&weekly), "500/week from Mon 09:00 UTC");
        assert_eq!(describe_policy(&Value::Null), "-");
    }
}
