//! Dependencies inside the engine flow one way. Every module path a source file names
//! (`use crate::…`, `use super::…`, `crate::a::b` inline) becomes an edge from that file's module
//! to the module that defines the item (re-exports of a `mod.rs` followed to their source).
//! Between two sibling modules (children of one parent: `kernels` and `model` at the crate root,
//! `serve` and `train` inside `rack`) the edges must form a DAG; a parent and its own children
//! may use each other, which is what a module hierarchy is for. On top of that, the layers of
//! DESIGN.md: `kernels` below `model`, `gpu` below `kernels`, `check` below `kernels`, `quant`
//! below `model`, and `rack` standing alone. Unit tests of the module (`#[cfg(test)]`) are not
//! counted: they may reach wherever they need to.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

type ModPath = Vec<String>;

/// Every module file of the engine's library: its module path and its source without comments
/// and unit tests.
fn sources(root: &Path) -> BTreeMap<ModPath, String> {
    let mut out = BTreeMap::new();
    walk(root, &mut Vec::new(), &mut out);
    out
}

fn walk(dir: &Path, prefix: &mut ModPath, out: &mut BTreeMap<ModPath, String>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .map(|e| e.expect("dir entry").path())
        .collect();
    entries.sort();
    for path in entries {
        let name = path
            .file_stem()
            .and_then(|s| s.to_str())
            .expect("UTF-8 name")
            .to_string();
        if path.is_dir() {
            if prefix.is_empty() && name == "bin" {
                continue; // binaries are crates of their own, above the library
            }
            prefix.push(name);
            walk(&path, prefix, out);
            prefix.pop();
        } else if path.extension().is_some_and(|e| e == "rs") {
            let mut module = prefix.clone();
            if name != "mod" && name != "lib" {
                module.push(name);
            }
            let text = std::fs::read_to_string(&path).expect("source");
            out.insert(module, strip(&text));
        }
    }
}

/// The source without `//` comments and without its unit-test modules (`#[cfg(test)] mod`).
fn strip(text: &str) -> String {
    let mut out = String::new();
    let mut lines = text.lines().peekable();
    // Inside a test module: the brace depth still open.
    let mut skipping: Option<i64> = None;
    while let Some(line) = lines.next() {
        let code = line.split("//").next().unwrap_or("");
        if let Some(depth) = skipping.as_mut() {
            *depth += code.matches('{').count() as i64 - code.matches('}').count() as i64;
            if *depth <= 0 {
                skipping = None;
            }
            continue;
        }
        if line.trim() == "#[cfg(test)]"
            && lines
                .peek()
                .is_some_and(|next| next.trim_start().starts_with("mod "))
        {
            let head = lines.next().unwrap_or("");
            let depth = head.matches('{').count() as i64 - head.matches('}').count() as i64;
            if depth > 0 {
                skipping = Some(depth);
            }
            continue;
        }
        out.push_str(code);
        out.push('\n');
    }
    out
}

/// Expands a use tree (`a::{b, c::{d, e}}`) into its leaf paths.
fn expand(tree: &str) -> Vec<String> {
    let tree = tree.trim();
    let Some(open) = tree.find('{') else {
        let leaf = tree.split(" as ").next().unwrap_or(tree).trim();
        return vec![leaf.to_string()];
    };
    let head = tree[..open].trim_end_matches("::");
    let inner = &tree[open + 1..tree.rfind('}').unwrap_or(tree.len())];
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0, 0);
    for (i, ch) in inner.char_indices() {
        match ch {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&inner[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&inner[start..]);
    parts
        .into_iter()
        .filter(|p| !p.trim().is_empty())
        .flat_map(expand)
        .map(|leaf| match (head.is_empty(), leaf.as_str()) {
            (_, "self") => head.to_string(),
            (true, _) => leaf,
            (false, _) => format!("{head}::{leaf}"),
        })
        .collect()
}

/// `use` statements of a source (each starts a line): (is `pub use`, leaf path).
fn uses(src: &str) -> Vec<(bool, String)> {
    let mut out = Vec::new();
    let mut lines = src.lines();
    while let Some(line) = lines.next() {
        let line = line.trim_start();
        let (public, rest) = if let Some(r) = line.strip_prefix("use ") {
            (false, r)
        } else if let Some(r) = line.strip_prefix("pub use ") {
            (true, r)
        } else if let Some(r) = line.strip_prefix("pub(crate) use ") {
            (true, r)
        } else {
            continue;
        };
        let mut body = rest.to_string();
        while !body.contains(';') {
            match lines.next() {
                Some(more) => body.push_str(more),
                None => break,
            }
        }
        let end = body.find(';').unwrap_or(body.len());
        out.extend(expand(&body[..end]).into_iter().map(|p| (public, p)));
    }
    out
}

/// Inline paths that start with `crate::` or `super::` outside `use` statements.
fn inline_paths(src: &str) -> Vec<String> {
    let mut out = Vec::new();
    for start in ["crate::", "super::"] {
        let mut from = 0;
        while let Some(i) = src[from..].find(start) {
            let at = from + i;
            let before = src[..at].chars().next_back();
            let len = src[at..]
                .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
                .unwrap_or(src.len() - at);
            if before.is_none_or(|c| !(c.is_alphanumeric() || c == '_' || c == ':')) {
                out.push(src[at..at + len].trim_end_matches(':').to_string());
            }
            from = at + len.max(1);
        }
    }
    out
}

/// A path as written in module `from`, made absolute (segments from the crate root).
fn absolute(from: &ModPath, is_mod_file: bool, path: &str) -> Option<ModPath> {
    let mut segs: Vec<&str> = path.split("::").filter(|s| !s.is_empty()).collect();
    let mut base: ModPath = match segs.first() {
        Some(&"crate") => {
            segs.remove(0);
            Vec::new()
        }
        Some(&"super") => {
            let mut b = from.clone();
            while segs.first() == Some(&"super") {
                segs.remove(0);
                b.pop()?;
            }
            b
        }
        Some(&"self") => {
            segs.remove(0);
            from.clone()
        }
        // A path relative to the module: `use sub::Item` in a mod.rs names a child.
        Some(_) if is_mod_file => from.clone(),
        _ => return None,
    };
    base.extend(segs.iter().map(|s| s.to_string()));
    Some(base)
}

struct Crate {
    files: BTreeMap<ModPath, String>,
    /// For each module, its re-exports: item name -> absolute path of what it re-exports.
    reexports: BTreeMap<ModPath, BTreeMap<String, ModPath>>,
    dirs: BTreeSet<ModPath>,
}

impl Crate {
    fn new(files: BTreeMap<ModPath, String>) -> Crate {
        let dirs: BTreeSet<ModPath> = files
            .keys()
            .flat_map(|m| (0..m.len()).map(|n| m[..n].to_vec()))
            .collect();
        let mut reexports = BTreeMap::new();
        for (module, src) in &files {
            let is_dir = dirs.contains(module);
            let mut map = BTreeMap::new();
            for (public, path) in uses(src) {
                if let (true, Some(abs)) = (public, absolute(module, is_dir, &path)) {
                    if let Some(last) = abs.last() {
                        map.insert(last.clone(), abs);
                    }
                }
            }
            reexports.insert(module.clone(), map);
        }
        Crate {
            files,
            reexports,
            dirs,
        }
    }

    /// The module file that defines what `path` names: its longest prefix that is a module,
    /// through re-exports.
    fn resolve(&self, path: &ModPath, hops: usize) -> Option<ModPath> {
        let n = (0..=path.len())
            .rev()
            .find(|&n| self.files.contains_key(&path[..n]))?;
        let module = path[..n].to_vec();
        if let (Some(item), true) = (path.get(n), hops < 4) {
            if let Some(target) = self.reexports.get(&module).and_then(|r| r.get(item)) {
                if target != path {
                    return self.resolve(target, hops + 1);
                }
            }
        }
        Some(module)
    }

    /// Edges between modules, each with the file it comes from, re-exports left out.
    fn edges(&self) -> BTreeSet<(ModPath, ModPath)> {
        let mut out = BTreeSet::new();
        for (module, src) in &self.files {
            let is_dir = self.dirs.contains(module);
            let named = uses(src)
                .into_iter()
                .filter(|(public, _)| !public)
                .map(|(_, p)| p)
                .chain(inline_paths(src));
            for path in named {
                let Some(abs) = absolute(module, is_dir, &path) else {
                    continue;
                };
                if let Some(to) = self.resolve(&abs, 0) {
                    if &to != module {
                        out.insert((module.clone(), to));
                    }
                }
            }
        }
        out
    }
}

/// Sibling-level graphs: for each edge between modules that are not ancestor and descendant,
/// the edge between the two children of their common parent that contain them.
fn sibling_graphs(
    edges: &BTreeSet<(ModPath, ModPath)>,
) -> BTreeMap<ModPath, BTreeSet<(String, String)>> {
    let mut out: BTreeMap<ModPath, BTreeSet<(String, String)>> = BTreeMap::new();
    for (a, b) in edges {
        let common = a.iter().zip(b).take_while(|(x, y)| x == y).count();
        if common < a.len() && common < b.len() {
            out.entry(a[..common].to_vec())
                .or_default()
                .insert((a[common].clone(), b[common].clone()));
        }
    }
    out
}

/// One cycle of the graph, if it has any.
fn find_cycle(graph: &BTreeSet<(String, String)>) -> Option<Vec<String>> {
    let mut next: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (a, b) in graph {
        next.entry(a).or_default().push(b);
    }
    fn visit<'a>(
        node: &'a str,
        next: &BTreeMap<&'a str, Vec<&'a str>>,
        state: &mut BTreeMap<&'a str, u8>,
        stack: &mut Vec<&'a str>,
    ) -> Option<Vec<String>> {
        state.insert(node, 1);
        stack.push(node);
        for &n in next.get(node).into_iter().flatten() {
            match state.get(n) {
                Some(1) => {
                    let at = stack.iter().position(|&s| s == n).unwrap_or(0);
                    let mut cycle: Vec<String> =
                        stack[at..].iter().map(|s| s.to_string()).collect();
                    cycle.push(n.to_string());
                    return Some(cycle);
                }
                Some(_) => {}
                None => {
                    if let Some(c) = visit(n, next, state, stack) {
                        return Some(c);
                    }
                }
            }
        }
        stack.pop();
        state.insert(node, 2);
        None
    }
    let mut state = BTreeMap::new();
    let nodes: Vec<&str> = next.keys().copied().collect();
    for node in nodes {
        if !state.contains_key(node) {
            if let Some(c) = visit(node, &next, &mut state, &mut Vec::new()) {
                return Some(c);
            }
        }
    }
    None
}

/// Top-level modules that must not depend on the others named.
const FORBIDDEN: &[(&str, &[&str])] = &[
    (
        "rack",
        &["gpu", "kernels", "model", "plan", "bench", "check", "quant"],
    ),
    ("kernels", &["model", "plan", "bench"]),
    ("gpu", &["kernels", "model", "plan", "bench", "quant"]),
    ("check", &["kernels", "model", "gpu", "bench", "quant"]),
    ("quant", &["gpu", "kernels", "model", "bench"]),
    ("plan", &["model", "bench"]),
];

/// Everything wrong with a crate's dependencies, as messages.
fn violations(files: BTreeMap<ModPath, String>) -> Vec<String> {
    let krate = Crate::new(files);
    let edges = krate.edges();
    let mut out = Vec::new();
    for (parent, graph) in sibling_graphs(&edges) {
        if let Some(cycle) = find_cycle(&graph) {
            let shown = if parent.is_empty() {
                "crate".to_string()
            } else {
                parent.join("::")
            };
            out.push(format!(
                "cycle among the children of {shown}: {}",
                cycle.join(" -> ")
            ));
        }
    }
    for (a, b) in &edges {
        let (Some(top_a), Some(top_b)) = (a.first(), b.first()) else {
            continue;
        };
        for (layer, below) in FORBIDDEN {
            if top_a == layer && below.contains(&top_b.as_str()) {
                out.push(format!("{} uses {}", a.join("::"), b.join("::")));
            }
        }
    }
    out
}

fn engine_sources() -> BTreeMap<ModPath, String> {
    sources(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"))
}

fn module(path: &str) -> ModPath {
    path.split("::").map(str::to_string).collect()
}

#[test]
fn engine_dependencies_flow_one_way() {
    let files = engine_sources();
    assert!(files.len() > 40, "found only {} module files", files.len());
    let found = violations(files);
    assert!(found.is_empty(), "{}", found.join("\n"));
}

#[test]
fn the_checker_sees_the_engines_real_edges() {
    let edges = Crate::new(engine_sources()).edges();
    for (a, b) in [
        ("kernels::gemv", "gpu::context"),
        ("rack::serve", "rack::train"),
        ("rack::serve", "rack::params"), // through `pub use params::Params` in rack/mod.rs
        ("model::gpu::forward", "kernels::gemv"),
    ] {
        assert!(
            edges.contains(&(module(a), module(b))),
            "expected an edge {a} -> {b}"
        );
    }
}

/// Each of the cycles this test exists for, put back into the real sources, is reported.
#[test]
fn a_reintroduced_cycle_fails() {
    for (file, line, expect) in [
        (
            "check",
            "use crate::kernels::gemv::WIDE_K;",
            "check uses kernels::gemv",
        ),
        (
            "kernels::moe_route",
            "use crate::model::MoeConfig;",
            "kernels::moe_route uses model::config",
        ),
        (
            "rack::train",
            "use super::serve::eval;",
            "cycle among the children of rack: ",
        ),
        (
            "quant::block",
            "use crate::model::reference;",
            "cycle among the children of crate: ",
        ),
    ] {
        let mut files = engine_sources();
        let src = files.get_mut(&module(file)).expect("module exists");
        src.insert_str(0, &format!("{line}\n"));
        let found = violations(files);
        assert!(
            found.iter().any(|v| v.contains(expect)),
            "planting `{line}` in {file} was not reported as {expect:?}: {found:?}"
        );
    }
}

#[test]
fn use_trees_expand_to_their_leaves() {
    assert_eq!(
        expand("super::{a, b::{c, d as e}, self}"),
        ["super::a", "super::b::c", "super::b::d", "super"]
    );
    assert_eq!(
        find_cycle(
            &[("a", "b"), ("b", "c"), ("c", "a")]
                .map(|(x, y)| (x.into(), y.into()))
                .into()
        ),
        Some(vec!["a".into(), "b".into(), "c".into(), "a".into()])
    );
    assert_eq!(
        find_cycle(
            &[("a", "b"), ("a", "c"), ("b", "c")]
                .map(|(x, y)| (x.into(), y.into()))
                .into()
        ),
        None
    );
}
