//! The core's floors (ARCHITECTURE.md): each module of core/src imports only from its own floor
//! and those below, no circle runs through its files (engine/ counts as one), and internal code
//! names what it uses by module path, never through the crate root's re-exports. An import scan
//! over core/src, without a server: it reads the sources, not the compiled crate.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The floors, lowest first. A module imports only from modules on its floor or below.
const FLOORS: &[&[&str]] = &[
    // 1. leaves
    &["error", "mode", "order", "validate", "acl", "tls", "sasl", "dispatch"],
    // 2. the session: its state, Closed, the loss counter
    &["session"],
    // 3. the connection (ClientInner, its options, the create window, attempt ids), memory
    &["connection", "memory"],
    // 4. requests and their retries
    &["retry"],
    // 5. holds, owners, lost callbacks
    &["hold", "owners", "lost_callbacks"],
    // 6. the engine (with the policy), owning the recipe registry and the types it needs
    &["engine", "policy"],
    // 7. the recipes' public faces
    &["lock", "rwlock", "semaphore", "multi_lock"],
    // 8. the public Client
    &["client"],
    // 9. the crate root, the bindings' own surface, and the C ABI above them (a binding, which
    // may use the root's names)
    &["lib", "binding", "ffi"],
];

/// Modules that may name things through the crate root (`crate::Client`): the root itself and
/// the C ABI, which is a binding of the public API.
const ROOT_USERS: &[&str] = &["lib", "ffi"];

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// The module a file of core/src belongs to: its stem at the top, its directory below.
fn module_of(file: &Path) -> String {
    let relative = file.strip_prefix(src()).unwrap();
    let mut parts = relative.components().map(|c| c.as_os_str().to_string_lossy().into_owned());
    let first = parts.next().unwrap();
    match parts.next() {
        Some(_) => first,
        None => first.trim_end_matches(".rs").to_owned(),
    }
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The code of a file, without comments (doc links name what they like) and without its unit
/// tests (the `#[cfg(test)]` module at its end, which may use anything to test).
fn code(text: &str) -> String {
    let mut code = String::new();
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        let trimmed = line.trim_start();
        if trimmed == "#[cfg(test)]" && lines.peek().is_some_and(|next| next.trim_start().starts_with("mod tests")) {
            break;
        }
        let without_comment = match line.find("//") {
            // A `//` inside a string literal (a URL) is rare in core/src; none starts a path.
            Some(at) => &line[..at],
            None => line,
        };
        code.push_str(without_comment);
        code.push('\n');
    }
    code
}

/// The first path segments after each `crate::` in `code`, a braced group's each.
fn crate_references(code: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find("crate::") {
        // Not `zklock_crate::` or the like.
        let before = rest[..at].chars().next_back();
        rest = &rest[at + "crate::".len()..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        if let Some(group) = rest.strip_prefix('{') {
            let end = group.find('}').expect("a closed use group");
            for item in group[..end].split(',') {
                let name: String = item.trim().chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
                if !name.is_empty() {
                    found.push(name);
                }
            }
        } else {
            let name: String = rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
            found.push(name);
        }
    }
    found
}

/// Every (file, module it names) pair of core/src, and every name used through the root.
struct Scan {
    /// module -> modules it names
    edges: BTreeMap<String, BTreeSet<String>>,
    /// (file, name) for each `crate::Name` that is not a module
    through_root: Vec<(String, String)>,
}

fn scan(src: &Path) -> Scan {
    scan_at(src)
}

fn floor_of(module: &str) -> usize {
    FLOORS.iter().position(|floor| floor.contains(&module)).unwrap()
}

/// The imports that go up a floor, as `from -> to` lines.
fn upward(scan: &Scan) -> Vec<String> {
    let mut up = Vec::new();
    for (from, tos) in &scan.edges {
        for to in tos {
            if floor_of(to) > floor_of(from) {
                up.push(format!("{from} (floor {}) imports {to} (floor {})", floor_of(from) + 1, floor_of(to) + 1));
            }
        }
    }
    up
}

/// A circle among the modules, if there is one.
fn circle(scan: &Scan) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        edges: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|seen| seen == node) {
            let mut circle = path[at..].to_vec();
            circle.push(node.to_owned());
            return Some(circle);
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.to_owned());
        for next in edges.get(node).into_iter().flatten() {
            if let Some(circle) = visit(next, edges, path, done) {
                return Some(circle);
            }
        }
        path.pop();
        done.insert(node.to_owned());
        None
    }
    let mut done = BTreeSet::new();
    for node in scan.edges.keys() {
        if let Some(circle) = visit(node, &scan.edges, &mut Vec::new(), &mut done) {
            return Some(circle);
        }
    }
    None
}

#[test]
fn no_floor_imports_a_higher_one() {
    let scan = scan(&src());
    let up = upward(&scan);
    assert!(up.is_empty(), "imports up a floor (see ARCHITECTURE.md):\n{}", up.join("\n"));
}

#[test]
fn no_circle_runs_through_the_core() {
    let scan = scan(&src());
    if let Some(circle) = circle(&scan) {
        panic!("the core's modules import each other in a circle: {}", circle.join(" -> "));
    }
}

/// The C ABI's modules (core/src/ffi) and those each names (`super::x`, `crate::ffi::x`).
fn ffi_edges() -> BTreeMap<String, BTreeSet<String>> {
    let dir = src().join("ffi");
    let mut files = Vec::new();
    rust_files(&dir, &mut files);
    let modules: BTreeSet<String> =
        files.iter().map(|file| file.file_stem().unwrap().to_string_lossy().into_owned()).collect();
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for file in &files {
        let module = file.file_stem().unwrap().to_string_lossy().into_owned();
        // `super::x` and `crate::ffi::x` both name the C ABI's module x.
        let code = code(&std::fs::read_to_string(file).unwrap()).replace("crate::ffi::", "super::");
        let named = crate_references(&code.replace("crate::", "crate_::").replace("super::", "crate::"));
        for name in named {
            if modules.contains(&name) && name != module && name != "mod" {
                edges.entry(module.clone()).or_default().insert(name);
            }
        }
    }
    edges
}

#[test]
fn no_circle_runs_through_the_c_abi() {
    let scan = Scan { edges: ffi_edges(), through_root: Vec::new() };
    if let Some(circle) = circle(&scan) {
        panic!("the C ABI's modules import each other in a circle: {}", circle.join(" -> "));
    }
}

#[test]
fn internal_code_imports_by_module_path() {
    let scan = scan(&src());
    let listed: Vec<String> = scan.through_root.iter().map(|(file, name)| format!("{file}: crate::{name}")).collect();
    assert!(listed.is_empty(), "names taken through the crate root's re-exports:\n{}", listed.join("\n"));
}

/// The scan itself: a planted upward import, circle and root import are each found (a copy of
/// core/src with one line added to a file of a low floor).
#[test]
fn the_scan_finds_a_planted_upward_import() {
    let planted = std::env::temp_dir().join(format!("zklock-floors-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&planted);
    copy_dir(&src(), &planted);
    let session = planted.join("session.rs");
    let text = std::fs::read_to_string(&session).unwrap();
    std::fs::write(&session, format!("{text}\nuse crate::client::Client;\nfn _f(_: crate::Lock) {{}}\n")).unwrap();
    let scan = scan_at(&planted);
    let _ = std::fs::remove_dir_all(&planted);
    assert!(
        upward(&scan).iter().any(|line| line.starts_with("session (floor 2) imports client")),
        "{:?}",
        upward(&scan)
    );
    assert!(circle(&scan).is_some());
    assert!(scan.through_root.iter().any(|(file, name)| file == "session.rs" && name == "Lock"));
}

/// The scan of core/src, or of a copy of it at `root`.
fn scan_at(root: &Path) -> Scan {
    let mut files = Vec::new();
    rust_files(root, &mut files);
    files.sort();
    // Files are read from `root`; modules are named as in core/src.
    let modules: BTreeSet<String> = FLOORS.iter().flat_map(|floor| floor.iter().map(|m| m.to_string())).collect();
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut through_root = Vec::new();
    for file in &files {
        let module = module_of(&src().join(file.strip_prefix(root).unwrap()));
        assert!(modules.contains(&module), "{} is on no floor: add its module to FLOORS", file.display());
        let text = std::fs::read_to_string(file).unwrap();
        for name in crate_references(&code(&text)) {
            if modules.contains(&name) {
                if name != module {
                    edges.entry(module.clone()).or_default().insert(name);
                }
            } else if !ROOT_USERS.contains(&module.as_str()) {
                through_root.push((file.strip_prefix(root).unwrap().display().to_string(), name));
            }
        }
    }
    Scan { edges, through_root }
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let path = entry.unwrap().path();
        let target = to.join(path.file_name().unwrap());
        if path.is_dir() {
            copy_dir(&path, &target);
        } else {
            std::fs::copy(&path, &target).unwrap();
        }
    }
}
