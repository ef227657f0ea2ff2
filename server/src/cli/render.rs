//! How the operator CLI draws answers: aligned plain-text tables and instants in a named zone.
//! The API speaks RFC 3339 UTC; people read wall clocks, so every instant shown here names the
//! zone it is in (REQ-11: the policy's zone and the viewer's local time).

use chrono::{DateTime, Local, Utc};
use chrono_tz::Tz;
use serde_json::Value;

/// Columns are separated by this many spaces.
const COLUMN_GAP: usize = 2;

/// A plain-text table: a header row, then rows, each column as wide as its widest cell.
pub struct Table {
    headers: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    pub fn new(headers: &[&str]) -> Table {
        Table { headers: headers.iter().map(|h| h.to_string()).collect(), rows: Vec::new() }
    }

    pub fn row(&mut self, cells: Vec<String>) {
        debug_assert_eq!(cells.len(), self.headers.len(), "a row has one cell per column");
        // Identifiers are never cut (a cut id is a wrong id); callers clip free text themselves.
        self.rows.push(cells.iter().map(|cell| one_line(cell)).collect());
    }

    /// The table as lines, without trailing spaces.
    pub fn render(&self) -> String {
        let mut widths: Vec<usize> = self.headers.iter().map(|h| h.chars().count()).collect();
        for row in &self.rows {
            for (width, cell) in widths.iter_mut().zip(row) {
                *width = (*width).max(cell.chars().count());
            }
        }
        let mut out = String::new();
        for row in std::iter::once(&self.headers).chain(&self.rows) {
            let mut line = String::new();
            for (cell, width) in row.iter().zip(&widths) {
                line.push_str(cell);
                line.push_str(&" ".repeat(width - cell.chars().count() + COLUMN_GAP));
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out
    }
}

/// Control characters as spaces: one cell stays on one line, and text an agent wrote (a title)
/// cannot smuggle terminal escape sequences onto the operator's screen.
pub fn one_line(text: &str) -> String {
    text.chars().map(|c| if c.is_control() { ' ' } else { c }).collect()
}

/// `text` on one line, cut to `chars_max` characters with a trailing `…` when longer, so one long
/// title cannot push every other column off the screen.
pub fn clip(text: &str, chars_max: usize) -> String {
    let flat = one_line(text);
    if flat.chars().count() <= chars_max {
        return flat;
    }
    let mut cut: String = flat.chars().take(chars_max.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

/// The viewer's local zone. `TZ` naming an IANA zone gives abbreviations (PDT); otherwise the
/// system's zone, shown by its UTC offset, which chrono can always tell.
#[derive(Debug, Clone, Copy)]
pub enum Viewer {
    Named(Tz),
    System,
}

impl Viewer {
    pub fn from_env() -> Viewer {
        std::env::var("TZ")
            .ok()
            .and_then(|tz| tz.trim_start_matches(':').parse::<Tz>().ok())
            .map_or(Viewer::System, Viewer::Named)
    }

    /// `2026-03-10 03:00 EDT`, or `2026-03-10 03:00 -04:00` for an unnamed system zone.
    pub fn format(self, instant: DateTime<Utc>) -> String {
        match self {
            Viewer::Named(tz) => in_zone(instant, tz),
            Viewer::System => instant.with_timezone(&Local).format("%Y-%m-%d %H:%M %:z").to_string(),
        }
    }
}

/// `2026-03-10 00:00 PDT`: an instant on the wall clock of `tz`, with the zone's abbreviation.
pub fn in_zone(instant: DateTime<Utc>, tz: Tz) -> String {
    instant.with_timezone(&tz).format("%Y-%m-%d %H:%M %Z").to_string()
}

/// An RFC 3339 timestamp from the API, or None for null, absent or unreadable.
pub fn instant(value: Option<&Value>) -> Option<DateTime<Utc>> {
    let text = value?.as_str()?;
    DateTime::parse_from_rfc3339(text).ok().map(|t| t.with_timezone(&Utc))
}

/// A JSON string or number as a cell; `-` for null or absent.
pub fn text(value: Option<&Value>) -> String {
    match value {
        None | Some(Value::Null) => "-".to_string(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
    }
}

/// `3/100`: a count of a limit. No limit is `-`; an unknown count (admission unavailable) `?`.
pub fn ratio(count: Option<&Value>, limit: Option<&Value>) -> String {
    let part = |value: Option<&Value>, absent: &str| {
        value.and_then(Value::as_i64).map_or(absent.to_string(), |n| n.to_string())
    };
    match (count.and_then(Value::as_i64), limit.and_then(Value::as_i64)) {
        (None, None) => "-".to_string(),
        _ => format!("{}/{}", part(count, "?"), part(limit, "-")),
    }
}

/// Writes `text` to stdout with one trailing newline. A closed pipe (`| head`) ends the output
/// quietly instead of panicking the way `println!` does.
pub fn emit(text: &str) {
    use std::io::Write;
    let mut stdout = std::io::stdout().lock();
    let newline: &[u8] = if text.ends_with('\n') || text.is_empty() { b"" } else { b"\n" };
    let _ = stdout.write_all(text.as_bytes()).and_then(|()| stdout.write_all(newline)).and_then(|()| stdout.flush());
}

/// The answer to a command the server acknowledges with 204: with --json the API body verbatim
/// (a 204 has none, so nothing), otherwise `line`, saying what was done.
pub fn emit_done(raw: &str, json: bool, line: &str) {
    if !json {
        emit(line);
    } else if !raw.is_empty() {
        emit(raw);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn tables_align_columns_and_trim_line_ends() {
        let mut table = Table::new(&["QUEUE", "USED"]);
        table.row(vec!["inbox".into(), "3/100".into()]);
        table.row(vec!["investigations".into(), "-".into()]);
        assert_eq!(table.render(), "QUEUE           USED\ninbox           3/100\ninvestigations  -\n");
    }

    #[test]
    fn long_or_multiline_cells_are_clipped_to_one_line() {
        assert_eq!(clip("a\nb", 10), "a b");
        assert_eq!(clip("abcdefghij", 5), "abcd…");
        assert_eq!(one_line("\u{1b}[2Jgone"), " [2Jgone", "no escape sequence reaches the terminal");
    }

    #[test]
    fn instants_are_shown_in_the_named_zone() {
        let resets = instant(Some(&json!("2026-03-10T07:00:00.000Z"))).expect("parses");
        assert_eq!(in_zone(resets, chrono_tz::America::Los_Angeles), "2026-03-10 00:00 PDT");
        assert_eq!(Viewer::Named(chrono_tz::Europe::Berlin).format(resets), "2026-03-10 08:00 CET");
        assert_eq!(instant(Some(&Value::Null)), None);
    }

    #[test]
    fn ratios_mark_missing_limits_and_counts() {
        assert_eq!(ratio(Some(&json!(3)), Some(&json!(100))), "3/100");
        assert_eq!(ratio(Some(&json!(1)), Some(&Value::Null)), "1/-");
        assert_eq!(ratio(None, Some(&json!(5))), "?/5");
        assert_eq!(ratio(None, None), "-");
    }
}
