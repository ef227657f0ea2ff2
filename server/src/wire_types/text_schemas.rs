//! The patterns of the texts the server reads, as JSON Schema regular expressions: each copies a
//! validator and cites it, so a limit changed in one is found from the other.

use models::identity::QUEUE_NAME_LENGTH_MAX;
use models::window::{HHMM_PATTERN, zone_alternation};

/// A string without the NUL character, which PostgreSQL cannot store (`models::storable`).
pub const NO_NUL: &str = "^[^\\u0000]*$";

/// Id and slug characters: ids are `<prefix>_<32 hex>`, slugs `[a-z0-9-]`.
pub const REFERENCE: &str = "^[a-z0-9_-]{1,64}$";

/// The characters Rust's `char::is_whitespace` names (Unicode White_Space): a title or name
/// made only of these is blank, since the server trims before it checks.
const WHITE_SPACE: &str =
    "\\t\\n\\u000b\\u000c\\r \\u0085\\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000";

/// Day names of a shift, Monday first (`Shift::parse`).
const DAYS: [&str; 7] = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"];

/// Text that is not blank once trimmed and holds no NUL (`validate_title`, the vend's name).
pub fn not_blank() -> String {
    format!("^[^\\u0000]*[^\\u0000{WHITE_SPACE}][^\\u0000]*$")
}

/// A granted queue of a vend: `queue` or `team:<slug-or-id>/<queue>` (`vend::granted_queues`).
pub fn grant_pattern() -> String {
    format!("^(team:[^/\\u0000]+/)?[a-z0-9._-]{{1,{QUEUE_NAME_LENGTH_MAX}}}$")
}

/// A shift as `Shift::parse` reads it: `TZ=<zone> <days> <HH:MM>-<HH:MM>`, separated by ASCII
/// white space; days a comma list of days or forward ranges; start and end differ.
pub fn shift_pattern() -> String {
    let mut items: Vec<String> = Vec::new();
    for (first, from) in DAYS.iter().enumerate() {
        items.push((*from).to_string());
        items.extend(DAYS.iter().skip(first + 1).map(|to| format!("{from}-{to}")));
    }
    let item = format!("(?:{})", items.join("|"));
    let hhmm = HHMM_PATTERN;
    let space = "[\\t\\n\\f\\r ]";
    format!(
        "^{space}*TZ=(?:{zones}){space}+{item}(?:,{item})*{space}+(?!({hhmm})-\\1{space}*$){hhmm}-{hhmm}{space}*$",
        zones = zone_alternation()
    )
}
