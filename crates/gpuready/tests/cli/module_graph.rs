//! No module of any crate of the workspace imports a module that imports it
//! back.
//!
//! A cycle between modules is the shape a mutex blackboard takes in the code:
//! the wiring module owns shared state, its tasks reach back into it, and data
//! can then flow any way; in the engine it is inputs that need a judgement's
//! types (the core once had `facts` ↔ `evidence` and `facts` → `health` →
//! `evaluate` → `facts`). This test reads every file under each crate's `src/`
//! (no cluster, no compiler), takes each path that names a module of that
//! crate — `use crate::…`, `use super::…`, `self::…`, a child declared with
//! `mod x;` used as `x::…`, in `use` lines, expressions and macro arguments
//! alike, groups `{a, b::c}` expanded — and builds the graph module → module,
//! where a module is a file (`foo/mod.rs` is `foo`, inline `mod tests { … }`
//! belongs to its file). A child that names its parent through `super::` is an
//! edge like any other. The test fails naming every cycle it finds. A crate's
//! root is `lib.rs`; beside one, `main.rs` is the binary, a crate of its own
//! that nothing in the library can import, so it is left out; a crate without
//! a library (`gpuready-bench`) is read from `main.rs`, which is then the root
//! (`crate::x` in a child names it).
//!
//! Hand-written, not a maintained tool: `cargo modules dependencies --acyclic`
//! answers the same question, but it is a separate install (it builds on
//! rust-analyzer: minutes of compiling on a 2-core machine, before each CI run
//! that has no cache) and needs the whole crate analysed; `syn` would parse
//! the files, but leaves macro arguments unparsed, where `crate::…` paths in
//! `format!`/`matches!` calls are edges too. The tokenizer below is ~300 lines
//! with a test of its own.
//!
//! The house as docs/architecture.md draws it is checked here too: its table
//! of the core's modules and its table of the controller's rooms name every
//! file there is, and none that is gone.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A module: its path from the crate root (`[]` is `lib.rs`, or `main.rs`
/// in a crate without a library).
type Module = Vec<String>;

#[derive(Clone, Debug, PartialEq, Eq)]
enum Tok {
    Ident(String),
    PathSep,
    Open,
    Close,
    Comma,
    Star,
    Semi,
    Other,
}

/// Tokens of Rust source with comments, string and char literals removed
/// (a `{` inside a string must not count as a brace).
fn tokens(src: &str) -> Vec<Tok> {
    let c: Vec<char> = src.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < c.len() {
        let ch = c[i];
        let next = c.get(i + 1).copied();
        if ch == '/' && next == Some('/') {
            while i < c.len() && c[i] != '\n' {
                i += 1;
            }
        } else if ch == '/' && next == Some('*') {
            let mut depth = 0;
            while i < c.len() {
                if c[i] == '/' && c.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if c[i] == '*' && c.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
        } else if ch == 'r' && (next == Some('"') || next == Some('#')) && raw_string_at(&c, i) {
            // r"…" or r#"…"#
            let mut j = i + 1;
            let mut hashes = 0;
            while c.get(j) == Some(&'#') {
                hashes += 1;
                j += 1;
            }
            j += 1;
            'raw: while j < c.len() {
                if c[j] == '"' && (0..hashes).all(|h| c.get(j + 1 + h) == Some(&'#')) {
                    j += 1 + hashes;
                    break 'raw;
                }
                j += 1;
            }
            i = j;
            out.push(Tok::Other);
        } else if ch == '"' {
            i += 1;
            while i < c.len() && c[i] != '"' {
                if c[i] == '\\' {
                    i += 1;
                }
                i += 1;
            }
            i += 1;
            out.push(Tok::Other);
        } else if ch == '\'' {
            // A char literal ('x', '\n', '{') or a lifetime ('a).
            if next == Some('\\') {
                i += 2;
                while i < c.len() && c[i] != '\'' {
                    i += 1;
                }
                i += 1;
            } else if c.get(i + 2) == Some(&'\'') {
                i += 3;
            } else {
                i += 1;
            }
            out.push(Tok::Other);
        } else if ch.is_alphabetic() || ch == '_' {
            let start = i;
            while i < c.len() && (c[i].is_alphanumeric() || c[i] == '_') {
                i += 1;
            }
            let word: String = c[start..i].iter().collect();
            // `b"…"` and `br"…"` are byte strings: the prefix is not an ident.
            if (word == "b" || word == "br") && matches!(c.get(i), Some('"') | Some('#')) {
                continue;
            }
            out.push(Tok::Ident(word));
        } else {
            out.push(match ch {
                ':' if next == Some(':') => {
                    i += 1;
                    Tok::PathSep
                }
                '{' => Tok::Open,
                '}' => Tok::Close,
                ',' => Tok::Comma,
                '*' => Tok::Star,
                ';' => Tok::Semi,
                c if c.is_whitespace() => {
                    i += 1;
                    continue;
                }
                _ => Tok::Other,
            });
            i += 1;
        }
    }
    out
}

fn raw_string_at(c: &[char], i: usize) -> bool {
    // Not part of a longer identifier (`for"` cannot happen, `bar#` can't either).
    let before_ok = i == 0 || !(c[i - 1].is_alphanumeric() || c[i - 1] == '_');
    let mut j = i + 1;
    while c.get(j) == Some(&'#') {
        j += 1;
    }
    before_ok && c.get(j) == Some(&'"')
}

/// The paths (as segments) a use tree starting at `toks[i]` names; returns the
/// index after it. A group `{a, b::{c, *}}` gives one path per leaf.
fn use_tree(toks: &[Tok], mut i: usize, prefix: &[String], out: &mut Vec<Vec<String>>) -> usize {
    let mut path = prefix.to_vec();
    loop {
        match toks.get(i) {
            Some(Tok::Ident(w)) => {
                path.push(w.clone());
                i += 1;
                if toks.get(i) == Some(&Tok::PathSep) {
                    i += 1;
                    continue;
                }
                out.push(path);
                return i;
            }
            Some(Tok::Open) => {
                i += 1;
                loop {
                    match toks.get(i) {
                        Some(Tok::Close) => return i + 1,
                        Some(Tok::Comma) => i += 1,
                        None => return i,
                        _ => i = use_tree(toks, i, &path, out),
                    }
                }
            }
            _ => {
                // `*`, or the path ended at `::` followed by something else.
                out.push(path);
                return i;
            }
        }
    }
}

/// The module paths one file names, each resolved against `module` (the
/// file's module): `crate::`, `super::`, `self::` and declared children.
fn imports(module: &Module, src: &str, modules: &BTreeSet<Module>) -> BTreeSet<Module> {
    let toks = tokens(src);
    // Children declared with `mod x;` (files), and inline `mod x {` blocks.
    let mut children = BTreeSet::new();
    for w in toks.windows(3) {
        if let [Tok::Ident(m), Tok::Ident(name), Tok::Semi] = w
            && m == "mod"
        {
            children.insert(name.clone());
        }
    }
    // Inline modules open at a brace depth; `super::` inside one means the file.
    let mut inline: Vec<usize> = Vec::new();
    let mut depth = 0usize;
    let mut found = BTreeSet::new();
    let mut i = 0;
    while i < toks.len() {
        match &toks[i] {
            Tok::Open => {
                depth += 1;
                i += 1;
                continue;
            }
            Tok::Close => {
                depth = depth.saturating_sub(1);
                if inline.last() == Some(&depth) {
                    inline.pop();
                }
                i += 1;
                continue;
            }
            Tok::Ident(m)
                if m == "mod"
                    && matches!(toks.get(i + 1), Some(Tok::Ident(_)))
                    && toks.get(i + 2) == Some(&Tok::Open) =>
            {
                inline.push(depth);
                depth += 1;
                i += 3;
                continue;
            }
            _ => {}
        }
        let after_sep = i > 0 && toks[i - 1] == Tok::PathSep;
        let starts = match &toks[i] {
            Tok::Ident(w) if !after_sep && toks.get(i + 1) == Some(&Tok::PathSep) => {
                w == "crate" || w == "super" || w == "self" || children.contains(w)
            }
            _ => false,
        };
        if !starts {
            i += 1;
            continue;
        }
        let mut paths = Vec::new();
        let end = use_tree(&toks, i, &[], &mut paths);
        for p in paths {
            if let Some(target) = resolve(module, inline.len(), &p, modules) {
                found.insert(target);
            }
        }
        i = end.max(i + 1);
    }
    found.remove(module);
    found
}

/// The file module a path names: its longest prefix that is a module.
fn resolve(
    module: &Module,
    inline_depth: usize,
    path: &[String],
    modules: &BTreeSet<Module>,
) -> Option<Module> {
    let mut base = module.clone();
    let mut rest = path;
    // Inside an inline module, `self`/`super` are counted from it.
    let mut inline = inline_depth;
    match rest.first().map(String::as_str) {
        Some("crate") => {
            base.clear();
            inline = 0;
            rest = &rest[1..];
        }
        Some("self") => rest = &rest[1..],
        _ => {}
    }
    while rest.first().map(String::as_str) == Some("super") {
        if inline > 0 {
            inline -= 1;
        } else {
            base.pop()?;
        }
        rest = &rest[1..];
    }
    if inline > 0 {
        // A path into the inline module's own items: the same file.
        return Some(module.clone());
    }
    let mut target = base.clone();
    let mut candidate = base;
    for seg in rest {
        candidate.push(seg.clone());
        if modules.contains(&candidate) {
            target = candidate.clone();
        }
    }
    Some(target)
}

/// The module of a file under `src`. `src/main.rs` is the crate root `[]`:
/// `crate_files` keeps it only for a crate without `lib.rs`, where it is the
/// root that `crate::…` names; calling it "main" would hide every arrow from a
/// child back up into it.
fn module_of(rel: &Path) -> Module {
    let mut segs: Vec<String> = rel
        .with_extension("")
        .iter()
        .map(|s| s.to_string_lossy().into_owned())
        .collect();
    let root_main = segs.len() == 1 && segs[0] == "main";
    if root_main || matches!(segs.last().map(String::as_str), Some("mod" | "lib")) {
        segs.pop();
    }
    segs
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

fn name(m: &Module) -> String {
    if m.is_empty() {
        "crate".to_owned()
    } else {
        m.join("::")
    }
}

/// The graph of a crate given as (path under src, source) pairs.
fn graph(files: &[(PathBuf, String)]) -> BTreeMap<Module, BTreeSet<Module>> {
    let modules: BTreeSet<Module> = files.iter().map(|(p, _)| module_of(p)).collect();
    files
        .iter()
        .map(|(p, src)| {
            let m = module_of(p);
            let edges = imports(&m, src, &modules);
            (m, edges)
        })
        .collect()
}

/// Every cycle, one per strongly connected group of modules, as `a → b → a`
/// (followed by the group's other members when it has more).
fn cycles(g: &BTreeMap<Module, BTreeSet<Module>>) -> Vec<String> {
    let reach = |from: &Module| -> BTreeMap<Module, Module> {
        // Module → the module it was reached from (breadth first).
        let mut seen: BTreeMap<Module, Module> = BTreeMap::new();
        let mut queue = vec![from.clone()];
        while !queue.is_empty() {
            let mut next = Vec::new();
            for m in queue {
                for t in g.get(&m).into_iter().flatten() {
                    if !seen.contains_key(t) {
                        seen.insert(t.clone(), m.clone());
                        next.push(t.clone());
                    }
                }
            }
            queue = next;
        }
        seen
    };
    let reach_all: BTreeMap<&Module, BTreeMap<Module, Module>> =
        g.keys().map(|m| (m, reach(m))).collect();
    let mut reported: BTreeSet<&Module> = BTreeSet::new();
    let mut out = Vec::new();
    for m in g.keys() {
        let from = &reach_all[m];
        if reported.contains(m) || !from.contains_key(m) {
            continue;
        }
        // The whole strongly connected group is reported with this one cycle.
        let group: Vec<&Module> = g
            .keys()
            .filter(|p| from.contains_key(*p) && reach_all[*p].contains_key(m))
            .collect();
        reported.extend(group.iter().copied());
        // Walk back from m to m along the breadth-first parents.
        let mut path = vec![m.clone()];
        let mut at = from[m].clone();
        while at != *m {
            path.push(at.clone());
            at = from[&at].clone();
        }
        path.push(m.clone());
        path.reverse();
        let cycle = path.iter().map(name).collect::<Vec<_>>().join(" → ");
        if group.len() + 1 > path.len() {
            let all = group.iter().map(|p| name(p)).collect::<Vec<_>>().join(", ");
            out.push(format!("{cycle} (and every other path among: {all})"));
        } else {
            out.push(cycle);
        }
    }
    out
}

/// A crate's files under `src`, relative to it: the library's, or the
/// binary's where there is no library.
fn crate_files(src: &Path) -> Vec<(PathBuf, String)> {
    let mut paths = Vec::new();
    rust_files(src, &mut paths);
    let has_lib = src.join("lib.rs").is_file();
    paths
        .into_iter()
        .filter_map(|p| {
            let rel = p.strip_prefix(src).ok()?.to_path_buf();
            (!has_lib || rel != Path::new("main.rs")).then(|| {
                let text = std::fs::read_to_string(&p).expect("read source");
                (rel, text)
            })
        })
        .collect()
}

/// Every crate of the workspace (`members = ["crates/*"]`): name → its `src`.
fn workspace_crates() -> BTreeMap<String, PathBuf> {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("crates/")
        .to_path_buf();
    std::fs::read_dir(&crates)
        .expect("read crates/")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.join("Cargo.toml").is_file())
        .map(|p| {
            let name = p.file_name().expect("name").to_string_lossy().into_owned();
            (name, p.join("src"))
        })
        .collect()
}

#[test]
fn no_module_of_any_crate_imports_one_that_imports_it_back() {
    let crates = workspace_crates();
    assert_eq!(
        crates.keys().map(String::as_str).collect::<Vec<_>>(),
        [
            "gpuready",
            "gpuready-api",
            "gpuready-bench",
            "gpuready-core",
            "gpuready-testenv"
        ],
        "the workspace's crates (a new crate is covered by this test: add it here)"
    );
    let m = |s: &[&str]| -> Module { s.iter().map(|x| (*x).to_owned()).collect() };
    // Edges the parser must see, so a graph that is empty by accident of the
    // parser fails here: the controller's wiring imports its tasks, the
    // engine's orchestration its layer files, the bench's root its run;
    // every crate has some edge.
    let seen: BTreeMap<&str, (Module, Module)> = BTreeMap::from([
        (
            "gpuready",
            (m(&["controller"]), m(&["controller", "write", "node"])),
        ),
        (
            "gpuready-core",
            (m(&["evaluate"]), m(&["evaluate", "health"])),
        ),
        // A binary's root is `main.rs`: its children are seen from it.
        ("gpuready-bench", (m(&[]), m(&["run"]))),
    ]);
    let mut found = Vec::new();
    for (name, src) in &crates {
        let files = crate_files(src);
        assert!(
            files.len() >= 3,
            "{name}: found only {} files under src",
            files.len()
        );
        let g = graph(&files);
        assert!(
            g.values().any(|e| !e.is_empty()),
            "{name}: no import between its modules seen"
        );
        if let Some((from, to)) = seen.get(name.as_str()) {
            assert!(
                g.get(from).is_some_and(|e| e.contains(to)),
                "{name}: {} → {} not seen: {:?}",
                self::name(from),
                self::name(to),
                g.get(from)
            );
        }
        found.extend(cycles(&g).into_iter().map(|c| format!("{name}: {c}")));
    }
    assert!(
        found.is_empty(),
        "module import cycles (move what both sides need into a module that imports \
         neither):\n{}",
        found.join("\n")
    );
}

#[test]
fn the_parser_sees_a_child_naming_its_parent_and_ignores_its_own_tests() {
    let files = vec![
        (
            PathBuf::from("lib.rs"),
            "pub mod a;\npub fn root() {}".to_owned(),
        ),
        (
            PathBuf::from("a/mod.rs"),
            "pub mod b;\npub mod c;\nuse b::{X, self as bee};\npub struct Shared;\n\
             fn f() { let s = \"super::b::{\"; c::g(); }"
                .to_owned(),
        ),
        (
            PathBuf::from("a/b.rs"),
            "use super::Shared; // super::c in a comment\npub struct X;\n\
             #[cfg(test)]\nmod tests { use super::*; use crate::root; }"
                .to_owned(),
        ),
        (
            PathBuf::from("a/c.rs"),
            "use super::super::a::b::X;\npub fn g() {}".to_owned(),
        ),
    ];
    let g = graph(&files);
    let m = |s: &[&str]| -> Module { s.iter().map(|x| (*x).to_owned()).collect() };
    assert_eq!(
        g[&m(&["a"])],
        BTreeSet::from([m(&["a", "b"]), m(&["a", "c"])])
    );
    assert_eq!(g[&m(&["a", "b"])], BTreeSet::from([m(&["a"]), m(&[])]));
    assert_eq!(g[&m(&["a", "c"])], BTreeSet::from([m(&["a", "b"])]));
    assert_eq!(
        cycles(&g),
        vec!["a → a::b → a (and every other path among: a, a::b, a::c)".to_owned()]
    );
}

#[test]
fn a_binary_crates_main_rs_is_the_root_that_crate_paths_name() {
    // No lib.rs: main.rs declares the child and calls into it, the child
    // takes a helper from the root through `crate::` — an arrow back up.
    let files = vec![
        (
            PathBuf::from("main.rs"),
            "mod child;\npub fn helper() {}\nfn main() { child::run(); }".to_owned(),
        ),
        (
            PathBuf::from("child.rs"),
            "use crate::helper;\npub fn run() { helper(); }".to_owned(),
        ),
        (PathBuf::from("leaf.rs"), "pub fn f() {}".to_owned()),
    ];
    let g = graph(&files);
    let m = |s: &[&str]| -> Module { s.iter().map(|x| (*x).to_owned()).collect() };
    assert_eq!(module_of(Path::new("main.rs")), m(&[]));
    assert_eq!(module_of(Path::new("a/main.rs")), m(&["a", "main"]));
    assert_eq!(g[&m(&[])], BTreeSet::from([m(&["child"])]));
    assert_eq!(g[&m(&["child"])], BTreeSet::from([m(&[])]));
    assert_eq!(cycles(&g), vec!["crate → child → crate".to_owned()]);
}

/// The backticked names in column `col` of the markdown table rows that
/// follow the line starting with `header`, up to the first line that is not
/// a table row.
fn table_names(doc: &str, header: &str, col: usize) -> Vec<(String, BTreeSet<String>)> {
    let mut rows = Vec::new();
    let mut lines = doc.lines().skip_while(|l| !l.starts_with(header)).skip(2);
    for line in lines.by_ref().take_while(|l| l.starts_with('|')) {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        let key = cells.get(1).copied().unwrap_or_default().to_owned();
        let names = cells
            .get(col)
            .copied()
            .unwrap_or_default()
            .split('`')
            .skip(1)
            .step_by(2)
            .map(str::to_owned)
            .collect();
        rows.push((key, names));
    }
    rows
}

/// The modules a folder holds as files: `x.rs` is `x`, a folder `x/` is `x`
/// (`keep_mod` keeps `mod.rs` as it is named); tests files are not counted.
fn files_of(dir: &Path, keep_mod: bool) -> BTreeSet<String> {
    std::fs::read_dir(dir)
        .expect("read the folder")
        .flatten()
        .filter_map(|e| {
            let p = e.path();
            let stem = p.file_stem()?.to_string_lossy().into_owned();
            match () {
                _ if p.is_dir() => None,
                _ if stem == "lib" || stem == "main" => None,
                // A module's tests (`tests.rs` beside `mod.rs`) belong to it.
                _ if stem.ends_with("tests") => None,
                _ if stem == "mod" => keep_mod.then(|| "mod.rs".to_owned()),
                _ if p.extension().is_some_and(|x| x == "rs") => Some(stem),
                _ => None,
            }
        })
        .collect()
}

/// A folder that holds only a module's tests (`ledger/tests.rs` beside
/// `ledger.rs`): part of that module, not a room of its own.
fn holds_only_tests(dir: &Path) -> bool {
    std::fs::read_dir(dir)
        .expect("read the folder")
        .flatten()
        .all(|e| e.path().is_file() && e.file_name().to_string_lossy().ends_with("tests.rs"))
}

#[test]
fn the_architecture_page_names_every_module_of_the_core_and_every_file_of_the_controller() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let doc = std::fs::read_to_string(root.join("docs/architecture.md")).expect("architecture.md");
    // The core's table: one module a row, in its second column.
    let named: BTreeSet<String> = table_names(&doc, "| floor | module | role |", 2)
        .into_iter()
        .flat_map(|(_, n)| n.into_iter().take(1))
        .collect();
    let core = files_of(&root.join("crates/gpuready-core/src"), false);
    assert_eq!(
        named, core,
        "docs/architecture.md, \"The core's modules\": the table's modules against crates/gpuready-core/src"
    );
    // The controller's rooms: every file of each folder, and of the folder itself.
    let controller = root.join("crates/gpuready/src/controller");
    let rooms = table_names(&doc, "| room | files | what it does |", 2);
    assert!(rooms.len() >= 4, "the rooms table: {rooms:?}");
    let mut folders = BTreeSet::new();
    for (room, names) in rooms {
        let (dir, keep_mod) = match room.trim_matches('`').strip_suffix('/') {
            Some(sub) => (controller.join(sub), false),
            None => (controller.clone(), true),
        };
        folders.insert(dir.clone());
        assert_eq!(
            names,
            files_of(&dir, keep_mod),
            "docs/architecture.md, room {room}"
        );
    }
    let subfolders: BTreeSet<_> = std::fs::read_dir(&controller)
        .expect("controller/")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_dir() && !holds_only_tests(p))
        .collect();
    assert!(
        subfolders.is_subset(&folders),
        "a folder of controller/ without a room in docs/architecture.md: {subfolders:?}"
    );
}
