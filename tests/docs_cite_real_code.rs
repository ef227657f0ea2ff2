//! The documentation cites real code (issue #30 item 6). `README.md`, `models/README.md` and
//! `docs/*.md` send an auditor to files and functions by name; this test fails when a cited path
//! or function no longer exists, so a rename cannot leave the map pointing at nothing.
//!
//! It reads files only: no binary, no database. It lives with the black-box tests because it
//! checks the repository as a whole, not one crate.
//!
//! What counts as a citation. Only text inside `backticks` and markdown link targets is read;
//! fenced code blocks are skipped.
//!
//! - **A path**: a link target that is not a URL or an anchor (resolved from the document's own
//!   directory), or the first word of a backticked span when that word contains `/` and either
//!   starts with a top-level entry of the repository (`ci/bench`, `engine/src/pg_store/claim.rs`)
//!   or ends in `/` or a file extension (`pg_store/claim.rs`, `model_store/`, which must then be
//!   the tail of some repository path). A bare file name with a source extension (`world.rs`,
//!   `queue.html`) must be the name of some file. `*` matches within one path segment. Build and
//!   runtime directories (`target/`, `.switchboard/`) are not the repository and are not checked.
//! - **Nothing outside the repository**: a path or link that climbs above the repository root
//!   (`../…` from the document's directory) or an absolute path under [`OUTSIDE_ROOTS`] is
//!   refused even if it exists on this machine; a reader of the repository has only the
//!   repository. Routes (`/api/v1/…`) are not paths.
//! - **A function**, which must be defined somewhere in the workspace's `.rs` files:
//!   `fn name`; `name()` (empty parentheses; PostgreSQL's own functions are listed in
//!   [`SQL_FUNCTIONS`]); a path `a::b::name` whose last segment is lower case (a function or a
//!   module; earlier lower-case segments must be modules, upper-case ones types); a bare name that
//!   ends in `_tx` (the store's transaction functions); and a bare test name, meaning one that
//!   starts with `reqN_`, `intake_sN_`, `specN_` or `security_`, or has five words or more
//!   (metric names, `switchboard_…`, are not functions). A name ending in `…` or `*` stands for
//!   any function starting with what precedes it. This file's own source defines nothing, so the
//!   bogus citations of its self-test stay bogus.
//! - **A macro**: `name!` must be defined by `macro_rules! name`.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

/// PostgreSQL functions the documents cite in the `name()` form; they are not Rust.
const SQL_FUNCTIONS: &[&str] = &["clock_timestamp", "now"];

/// This file: its bogus citations must not count as definitions.
const THIS_TEST: &str = "tests/docs_cite_real_code.rs";

/// Absolute paths that name this machine's files, never the repository's.
const OUTSIDE_ROOTS: &[&str] = &["/work/", "/home/", "/root/", "/tmp/"];

/// Directories the repository produces or uses at run time, not part of its sources.
const NOT_SOURCES: &[&str] = &[".git", "target", ".switchboard", "node_modules"];

/// Extensions a cited file may end in.
const FILE_EXTENSIONS: &[&str] = &["rs", "sql", "md", "html", "toml", "css", "js", "png", "json"];

/// Extensions for which a bare file name (no `/`) is taken as a citation.
const BARE_NAME_EXTENSIONS: &[&str] = &["rs", "sql", "html", "toml", "css", "js"];

/// The repository as the test sees it: every file and directory, and the names the Rust sources
/// define.
struct Repository {
    root: PathBuf,
    /// Paths relative to the root, `/`-separated; directories end in `/`.
    paths: BTreeSet<String>,
    functions: BTreeSet<String>,
    types: BTreeSet<String>,
    modules: BTreeSet<String>,
    macros: BTreeSet<String>,
}

/// One thing a document cites that the repository does not hold.
struct Drift {
    document: String,
    line_number: usize,
    cited: String,
    why: String,
}

#[test]
fn every_path_and_function_the_docs_cite_exists() {
    let repository = Repository::read(&workspace_root());
    let mut drifts = Vec::new();
    for document in repository.documents() {
        let text = fs::read_to_string(repository.root.join(&document)).expect("read a document");
        drifts.extend(check_document(&repository, &document, &text));
    }
    let report: Vec<String> = drifts
        .iter()
        .map(|drift| format!("{}:{}: `{}`: {}", drift.document, drift.line_number, drift.cited, drift.why))
        .collect();
    assert!(report.is_empty(), "the docs cite what the repository does not hold:\n{}", report.join("\n"));
}

/// The rules are themselves tested: a document made of bogus citations fails each one.
#[test]
fn a_bogus_citation_is_reported_with_its_document_line_and_name() {
    let repository = Repository::read(&workspace_root());
    let text = "intro\n`engine/src/no_such_file.rs` and `fn no_such_function`\n\
                `no_such_call()`, `models::admission::no_such_rule`, `req99_no_such_test`\n\
                `no_such_file.html`, `nowhere_tx`, `no_such_macro!`, [gone](gone.md)\n\
                `../../shared/contract.md`, `/work/shared/STYLE.md`, [up](../../x.md), `/api/v1/todos`\n\
                ```\n`fenced_code_is_not_read_at_all_here()`\n```\n\
                `engine/src/pg_store/claim.rs`, `../models/README.md`, `decide()`, `models::admission::decide`, `req1_*`\n";
    let drifts = check_document(&repository, "docs/bogus.md", text);
    let cited: Vec<(&str, usize)> = drifts.iter().map(|drift| (drift.cited.as_str(), drift.line_number)).collect();
    assert_eq!(
        cited,
        [
            ("engine/src/no_such_file.rs", 2),
            ("fn no_such_function", 2),
            ("no_such_call()", 3),
            ("models::admission::no_such_rule", 3),
            ("req99_no_such_test", 3),
            ("no_such_file.html", 4),
            ("nowhere_tx", 4),
            ("no_such_macro!", 4),
            ("gone.md", 4),
            ("../../shared/contract.md", 5),
            ("/work/shared/STYLE.md", 5),
            ("../../x.md", 5),
        ]
    );
}

fn workspace_root() -> PathBuf {
    // This test is declared by the server crate, one directory below the workspace root.
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("the server crate has a parent").to_path_buf()
}

impl Repository {
    fn read(root: &Path) -> Repository {
        let mut repository = Repository {
            root: root.to_path_buf(),
            paths: BTreeSet::new(),
            functions: BTreeSet::new(),
            types: BTreeSet::new(),
            modules: BTreeSet::new(),
            macros: BTreeSet::new(),
        };
        repository.walk(root, "");
        assert!(repository.paths.contains("Cargo.toml"), "{} is not the workspace root", root.display());
        repository
    }

    fn walk(&mut self, directory: &Path, prefix: &str) {
        let entries = fs::read_dir(directory).expect("read a repository directory");
        for entry in entries {
            let entry = entry.expect("read a directory entry");
            let name = entry.file_name().to_string_lossy().into_owned();
            if NOT_SOURCES.contains(&name.as_str()) {
                continue;
            }
            let relative = format!("{prefix}{name}");
            if entry.file_type().expect("read a file type").is_dir() {
                self.modules.insert(name);
                self.paths.insert(format!("{relative}/"));
                self.walk(&entry.path(), &format!("{relative}/"));
            } else {
                if let Some(stem) = name.strip_suffix(".rs")
                    && relative != THIS_TEST
                {
                    self.modules.insert(stem.to_string());
                    let source = fs::read_to_string(entry.path()).expect("read a Rust source");
                    self.read_definitions(&source);
                }
                self.paths.insert(relative);
            }
        }
    }

    /// Collects the names after `fn`, `struct`, `mod`, `macro_rules!` and the like. A word-level
    /// scan, not a parser: it may collect a few extra words (`fn(u32)` gives `u32`), never miss a
    /// definition.
    fn read_definitions(&mut self, source: &str) {
        let words: Vec<&str> = source
            .split(|character: char| !(character.is_alphanumeric() || character == '_'))
            .filter(|word| !word.is_empty())
            .collect();
        for pair in words.windows(2) {
            let (keyword, name) = (pair[0], pair[1].to_string());
            match keyword {
                "fn" => _ = self.functions.insert(name),
                "struct" | "enum" | "trait" | "type" | "union" => _ = self.types.insert(name),
                "mod" => _ = self.modules.insert(name),
                "macro_rules" => _ = self.macros.insert(name),
                _ => {}
            }
        }
    }

    fn documents(&self) -> Vec<String> {
        let mut documents = vec!["README.md".to_string(), "models/README.md".to_string()];
        documents.extend(self.paths.iter().filter(|path| path.starts_with("docs/") && path.ends_with(".md")).cloned());
        documents
    }

    /// Whether `pattern` (with `*` for any characters within one segment) names a path exactly,
    /// or, when `as_tail`, the end of some path after a `/`.
    fn holds(&self, pattern: &str, as_tail: bool) -> bool {
        self.paths.iter().any(|path| {
            glob_matches(pattern, path)
                || (as_tail
                    && path
                        .char_indices()
                        .any(|(index, character)| character == '/' && glob_matches(pattern, &path[index + 1..])))
        })
    }

    fn holds_file_named(&self, name: &str) -> bool {
        self.paths.iter().any(|path| path.rsplit('/').next() == Some(name))
    }

    fn defines_function(&self, name: &str) -> bool {
        match name.strip_suffix('…').or_else(|| name.strip_suffix('*')) {
            Some(prefix) => self.functions.iter().any(|function| function.starts_with(prefix)),
            None => self.functions.contains(name),
        }
    }
}

/// Every citation of one document that the repository does not hold, in document order.
fn check_document(repository: &Repository, document: &str, text: &str) -> Vec<Drift> {
    let mut drifts = Vec::new();
    let mut report = |line_number: usize, cited: &str, why: Option<String>| {
        if let Some(why) = why {
            drifts.push(Drift { document: document.to_string(), line_number, cited: cited.to_string(), why });
        }
    };
    let document_directory = document.rsplit_once('/').map_or("", |(directory, _)| directory);
    for (line_number, span) in code_spans(text) {
        report(line_number, &span, check_span(repository, document_directory, &span));
    }
    for (line_number, target) in link_targets(text) {
        let resolved = normalise(&format!("{document_directory}/{target}"));
        let why = match resolved {
            None => Some("the link leaves the repository".to_string()),
            Some(path) if !repository.holds(&path, false) && !repository.holds(&format!("{path}/"), false) => {
                Some(format!("the link resolves to `{path}`, which the repository does not hold"))
            }
            Some(_) => None,
        };
        report(line_number, &target, why);
    }
    drifts.sort_by_key(|drift| drift.line_number);
    drifts
}

/// What is wrong with one backticked span, if it is a citation at all.
fn check_span(repository: &Repository, document_directory: &str, span: &str) -> Option<String> {
    let first_word = span.split_whitespace().next()?;
    if let Some(why) = check_path(repository, document_directory, first_word) {
        return Some(why);
    }
    if span.contains(char::is_whitespace) && !span.starts_with("fn ") {
        return None;
    }
    if let Some(name) = span.strip_prefix("fn ") {
        return (!repository.defines_function(name)).then(|| format!("no `fn {name}` in the workspace"));
    }
    if let Some(name) = span.strip_suffix("()").filter(|name| is_identifier(name)) {
        let known = repository.defines_function(name) || SQL_FUNCTIONS.contains(&name);
        return (!known).then(|| format!("cited as a call, but no `fn {name}` in the workspace"));
    }
    if let Some(name) = span.strip_suffix('!').filter(|name| is_identifier(name)) {
        return (!repository.macros.contains(name)).then(|| format!("no `macro_rules! {name}` in the workspace"));
    }
    if span.contains("::") {
        return check_rust_path(repository, span);
    }
    let is_test_name = ["req", "intake_s", "spec"].iter().any(|prefix| numbered_prefix(span, prefix))
        || span.starts_with("security_")
        || span.matches('_').count() >= 4;
    let is_function =
        is_snake_name(span) && !span.starts_with("switchboard_") && (span.ends_with("_tx") || is_test_name);
    (is_function && !repository.defines_function(span)).then(|| format!("no `fn {span}` in the workspace"))
}

/// What is wrong with a word that looks like a repository path, if it is one.
fn check_path(repository: &Repository, document_directory: &str, word: &str) -> Option<String> {
    if OUTSIDE_ROOTS.iter().any(|root| word.starts_with(root)) {
        return Some("an absolute path outside the repository".to_string());
    }
    if word.starts_with("../") {
        return match normalise(&format!("{document_directory}/{word}")) {
            None => Some("the path leaves the repository".to_string()),
            Some(path) => check_path(repository, "", &path),
        };
    }
    if word.contains("://") || word.starts_with('/') || word.starts_with("..") || word.starts_with('~') {
        return None;
    }
    let word = word.strip_prefix("./").unwrap_or(word);
    let first_segment = word.split('/').next().unwrap_or_default();
    if NOT_SOURCES.contains(&first_segment) {
        return None;
    }
    let extension = word.rsplit_once('.').map(|(_, extension)| extension);
    let has_file_extension = extension.is_some_and(|extension| FILE_EXTENSIONS.contains(&extension));
    if !word.contains('/') {
        let bare_file = extension.is_some_and(|extension| BARE_NAME_EXTENSIONS.contains(&extension));
        let missing = bare_file && is_file_name(word) && !repository.holds_file_named(word);
        return missing.then(|| "no file of that name in the repository".to_string());
    }
    let at_top_level =
        repository.paths.contains(first_segment) || repository.paths.contains(&format!("{first_segment}/"));
    if at_top_level {
        let found = repository.holds(word, false) || repository.holds(&format!("{word}/"), false);
        return (!found).then(|| "no such path in the repository".to_string());
    }
    if word.ends_with('/') || has_file_extension {
        return (!repository.holds(word, true)).then(|| "no repository path ends like this".to_string());
    }
    None
}

/// `a::b::name`: upper-case segments must be types, the last lower-case one a function or a
/// module, earlier lower-case ones modules (or crates).
fn check_rust_path(repository: &Repository, span: &str) -> Option<String> {
    let segments: Vec<&str> = span.split("::").collect();
    for (index, segment) in segments.iter().enumerate() {
        let is_last = index + 1 == segments.len();
        if segment.ends_with('…') || segment.ends_with('*') {
            continue;
        }
        if !is_identifier(segment) {
            return None;
        }
        let upper_case = segment.starts_with(|character: char| character.is_ascii_uppercase());
        let found = if upper_case {
            repository.types.contains(*segment)
        } else if is_last {
            repository.defines_function(segment) || repository.modules.contains(*segment)
        } else {
            repository.modules.contains(*segment)
        };
        if !found {
            let kind = if upper_case {
                "type"
            } else if is_last {
                "function or module"
            } else {
                "module"
            };
            return Some(format!("no {kind} `{segment}` in the workspace"));
        }
    }
    None
}

/// Inline code spans with the line each starts on; a span may run over a line break, never over
/// a blank line (an unmatched backtick is dropped there). Fenced code blocks are skipped.
fn code_spans(text: &str) -> Vec<(usize, String)> {
    let mut spans = Vec::new();
    let mut open: Option<(usize, String)> = None;
    for (line_number, line) in prose_lines(text) {
        if line.trim().is_empty() {
            open = None;
            continue;
        }
        if let Some((_, span)) = open.as_mut() {
            span.push(' ');
        }
        for character in line.chars() {
            match (character, open.take()) {
                ('`', None) => open = Some((line_number, String::new())),
                ('`', Some((start, span))) => spans.push((start, span.trim().to_string())),
                (character, Some((start, mut span))) => {
                    span.push(character);
                    open = Some((start, span));
                }
                (_, None) => {}
            }
        }
    }
    spans.into_iter().filter(|(_, span)| !span.is_empty()).collect()
}

/// Markdown link targets (`](target)`), with their line, that are neither URLs nor anchors.
fn link_targets(text: &str) -> Vec<(usize, String)> {
    let mut targets = Vec::new();
    for (line_number, line) in prose_lines(text) {
        for (index, _) in line.match_indices("](") {
            let rest = &line[index + 2..];
            let target = rest.split(')').next().unwrap_or_default();
            let target = target.split('#').next().unwrap_or_default();
            if !target.is_empty() && !target.contains("://") && !target.starts_with("mailto:") {
                targets.push((line_number, target.to_string()));
            }
        }
    }
    targets
}

/// The document's lines outside fenced code blocks, numbered from 1.
fn prose_lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    let mut in_fence = false;
    text.lines().enumerate().filter_map(move |(index, line)| {
        if line.trim_start().starts_with("```") {
            in_fence = !in_fence;
            return None;
        }
        (!in_fence).then_some((index + 1, line))
    })
}

/// `a/./b/../c` → `a/c`; `None` when the path climbs above the repository root.
fn normalise(path: &str) -> Option<String> {
    let mut segments: Vec<&str> = Vec::new();
    for segment in path.split('/') {
        match segment {
            "" | "." => {}
            ".." => _ = segments.pop()?,
            _ => segments.push(segment),
        }
    }
    Some(segments.join("/"))
}

fn glob_matches(pattern: &str, path: &str) -> bool {
    match pattern.split_once('*') {
        None => pattern == path,
        Some((before, after)) => {
            let Some(rest) = path.strip_prefix(before) else { return false };
            rest.char_indices()
                .map(|(index, _)| index)
                .chain([rest.len()])
                .take_while(|&index| !rest[..index].contains('/'))
                .any(|index| glob_matches(after, &rest[index..]))
        }
    }
}

fn numbered_prefix(name: &str, prefix: &str) -> bool {
    name.strip_prefix(prefix)
        .and_then(|rest| rest.split_once('_'))
        .is_some_and(|(number, _)| !number.is_empty() && number.chars().all(|character| character.is_ascii_digit()))
}

fn is_identifier(text: &str) -> bool {
    text.starts_with(|character: char| character.is_alphabetic() || character == '_')
        && text.chars().all(|character| character.is_alphanumeric() || character == '_')
}

/// A lower-case snake name, possibly cut short with `…` or `*` (`__other__` is a label, not one).
fn is_snake_name(text: &str) -> bool {
    let name = text.trim_end_matches(['…', '*']);
    name.starts_with(|character: char| character.is_ascii_lowercase())
        && name
            .chars()
            .all(|character| character.is_ascii_lowercase() || character.is_ascii_digit() || character == '_')
}

fn is_file_name(text: &str) -> bool {
    text.chars().all(|character| character.is_alphanumeric() || matches!(character, '_' | '-' | '.' | '*'))
}
