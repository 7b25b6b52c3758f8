//! The files of the runtime's `src/` form layers with no circle: no file names a file
//! that names it back, directly or through others.
//!
//! A file *names* a sibling when its text (code or doc links) says `crate::x` or lists
//! `x` in `use crate::{..}`, for a sibling module `x`. `lib.rs` is the root that
//! declares and re-exports every file; it is not a layer. It declares the files top
//! down, so each file names only files declared after it. Code may not reach a sibling
//! through the root's re-exports (`crate::Worker`), which would hide the edge; doc
//! links may, to point at a public item by its public path.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Every source file of the runtime: its module name and its text.
fn sources() -> BTreeMap<String, String> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = BTreeMap::new();
    for entry in std::fs::read_dir(&dir).expect("the runtime's directory") {
        let path = entry.expect("a directory entry").path();
        assert!(
            path.extension().is_some_and(|e| e == "rs"),
            "{} is not a flat .rs file: teach this check about it",
            path.display()
        );
        let name = path
            .file_stem()
            .and_then(|s| s.to_str())
            .expect("a file name")
            .to_owned();
        let text = std::fs::read_to_string(&path).expect("a readable source file");
        files.insert(name, text);
    }
    files
}

/// The part of `text` outside its unit tests (`mod tests`, which name their own file
/// through `super`).
fn without_tests(text: &str) -> &str {
    match text.find("#[cfg(test)]\nmod tests {") {
        Some(at) => &text[..at],
        None => text,
    }
}

fn ident(s: &str) -> &str {
    let end = s
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(s.len());
    &s[..end]
}

/// The first segments of the paths after each `prefix` in `text`, with whether each
/// was on a comment line.
fn named_after(text: &str, prefix: &str) -> Vec<(String, bool)> {
    let mut out = Vec::new();
    for (at, _) in text.match_indices(prefix) {
        let line_start = text[..at].rfind('\n').map_or(0, |i| i + 1);
        let comment = text[line_start..at].trim_start().starts_with("//");
        let rest = &text[at + prefix.len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let mut depth = 0usize;
            let mut item = String::new();
            for c in group.chars() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        out.push((ident(item.trim()).to_owned(), comment));
                        item.clear();
                        continue;
                    }
                    _ => {}
                }
                item.push(c);
            }
            out.push((ident(item.trim()).to_owned(), comment));
        } else if rest.starts_with('*') {
            out.push(("*".to_owned(), comment));
        } else {
            out.push((ident(rest).to_owned(), comment));
        }
    }
    out.retain(|(name, _)| !name.is_empty() && name != "self");
    out
}

/// Each file's siblings named, and the code lines that reach past them.
fn graph(files: &BTreeMap<String, String>) -> (BTreeMap<&str, BTreeSet<&str>>, Vec<String>) {
    let modules: BTreeSet<&str> = files
        .keys()
        .map(String::as_str)
        .filter(|m| *m != "lib")
        .collect();
    let mut edges: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    let mut hidden = Vec::new();
    for (name, text) in files {
        if name == "lib" {
            continue;
        }
        let text = without_tests(text);
        let named = edges.entry(name.as_str()).or_default();
        for prefix in ["crate::"] {
            for (target, comment) in named_after(text, prefix) {
                match modules.get(target.as_str()) {
                    Some(m) if *m != name.as_str() => {
                        named.insert(m);
                    }
                    Some(_) => {}
                    None if comment => {}
                    None => hidden.push(format!(
                        "{name}.rs: `{prefix}{target}` in code goes through the root's re-exports; name the file that defines it"
                    )),
                }
            }
        }
    }
    (edges, hidden)
}

/// A circle through `edges`, if there is one.
fn circle<'a>(edges: &BTreeMap<&'a str, BTreeSet<&'a str>>) -> Option<Vec<&'a str>> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        Open,
        Done,
    }
    fn visit<'a>(
        at: &'a str,
        edges: &BTreeMap<&'a str, BTreeSet<&'a str>>,
        marks: &mut BTreeMap<&'a str, Mark>,
        path: &mut Vec<&'a str>,
    ) -> Option<Vec<&'a str>> {
        match marks.get(at) {
            Some(Mark::Done) => return None,
            Some(Mark::Open) => {
                let from = path.iter().position(|p| *p == at).unwrap_or(0);
                let mut found = path[from..].to_vec();
                found.push(at);
                return Some(found);
            }
            None => {}
        }
        marks.insert(at, Mark::Open);
        path.push(at);
        for next in edges.get(at).into_iter().flatten() {
            if let Some(found) = visit(next, edges, marks, path) {
                return Some(found);
            }
        }
        path.pop();
        marks.insert(at, Mark::Done);
        None
    }
    let mut marks = BTreeMap::new();
    for start in edges.keys() {
        if let Some(found) = visit(start, edges, &mut marks, &mut Vec::new()) {
            return Some(found);
        }
    }
    None
}

#[test]
fn no_file_of_the_runtime_names_a_file_that_names_it_back() {
    let files = sources();
    assert!(
        files.len() > 10,
        "found only {:?}: is this the runtime's source directory?",
        files.keys()
    );
    let (edges, hidden) = graph(&files);
    assert!(hidden.is_empty(), "hidden edges:\n{}", hidden.join("\n"));
    let pairs: Vec<String> = edges
        .iter()
        .flat_map(|(a, named)| named.iter().map(move |b| (*a, *b)))
        .filter(|(a, b)| a < b && edges.get(b).is_some_and(|n| n.contains(a)))
        .map(|(a, b)| format!("{a}.rs <-> {b}.rs"))
        .collect();
    assert!(
        pairs.is_empty(),
        "files that name each other:\n{}",
        pairs.join("\n")
    );
    if let Some(found) = circle(&edges) {
        panic!("a circle of files: {}", found.join(".rs -> ") + ".rs");
    }
}

/// The modules `lib.rs` declares, in its order.
fn declared(root: &str) -> Vec<&str> {
    root.lines()
        .filter_map(|line| line.trim().strip_prefix("mod "))
        .map(|rest| rest.trim_end_matches(';'))
        .collect()
}

#[test]
fn every_file_is_declared_and_names_only_files_declared_after_it() {
    let files = sources();
    let order = declared(&files["lib"]);
    for name in files.keys().filter(|n| *n != "lib") {
        assert!(
            order.contains(&name.as_str()),
            "{name}.rs is not declared in lib.rs"
        );
    }
    for name in &order {
        assert!(
            files.contains_key(*name),
            "lib.rs declares `{name}`, which is not a file of src/"
        );
    }
    let at = |m: &str| order.iter().position(|d| *d == m);
    let (edges, _) = graph(&files);
    let upward: Vec<String> = edges
        .iter()
        .flat_map(|(a, named)| named.iter().map(move |b| (*a, *b)))
        .filter(|(a, b)| at(b) < at(a))
        .map(|(a, b)| format!("{a}.rs names {b}.rs, declared before it"))
        .collect();
    assert!(
        upward.is_empty(),
        "lib.rs declares the files top down; these name a file above them:\n{}",
        upward.join("\n")
    );
}

#[test]
fn the_check_sees_a_circle_when_there_is_one() {
    let mut files = BTreeMap::new();
    files.insert("lib".to_owned(), String::new());
    files.insert("a".to_owned(), "use crate::b::B;\n".to_owned());
    files.insert("b".to_owned(), "use crate::{c, x::Y};\n".to_owned());
    files.insert(
        "c".to_owned(),
        "/// See [`A`](crate::a::A).\nfn f() {}\n".to_owned(),
    );
    files.insert(
        "x".to_owned(),
        "fn g() { crate::Reexported::new(); }\n".to_owned(),
    );
    let (edges, hidden) = graph(&files);
    assert_eq!(edges["b"], BTreeSet::from(["c", "x"]));
    assert_eq!(hidden.len(), 1, "{hidden:?}");
    assert_eq!(circle(&edges), Some(vec!["a", "b", "c", "a"]));
}
