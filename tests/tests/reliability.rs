//! docs/RELIABILITY.md cannot drift: every test its table names exists, and every browser
//! failure-path test and every fuzz target has a row.

use std::path::Path;

fn root() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
}

fn read(path: &str) -> String {
    std::fs::read_to_string(root().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The (file, test) pairs of the table's last column: `` `file` › name ``.
fn rows() -> Vec<(String, String)> {
    read("docs/RELIABILITY.md")
        .lines()
        .filter(|l| l.starts_with('|') && l.contains(" › "))
        .map(|l| {
            let cell = l
                .trim_end_matches('|')
                .rsplit('|')
                .next()
                .unwrap_or("")
                .trim();
            let (file, name) = cell.split_once(" › ").unwrap_or(("", ""));
            (file.trim_matches('`').to_owned(), name.trim().to_owned())
        })
        .collect()
}

/// The names of the `test('…')` calls of a browser test file.
fn e2e_tests(source: &str) -> Vec<String> {
    source
        .split("\ntest('")
        .skip(1)
        .filter_map(|s| s.split_once("',").map(|(name, _)| name.replace("\\'", "'")))
        .collect()
}

#[test]
fn every_named_test_exists() {
    let rows = rows();
    assert!(rows.len() >= 20, "{} rows", rows.len());
    for (file, name) in rows {
        let source = read(&file);
        let found = if file.ends_with(".mjs") {
            e2e_tests(&source).contains(&name)
        } else {
            source.contains(&format!("fn {name}()"))
        };
        assert!(
            found,
            "docs/RELIABILITY.md names {file} › {name}, which is not there"
        );
    }
}

#[test]
fn every_failure_path_and_fuzz_target_has_a_row() {
    let rows = rows();
    let has = |file: &str, name: &str| rows.iter().any(|(f, n)| f == file && n == name);
    let e2e = "tests/e2e/failures.test.mjs";
    let tests = e2e_tests(&read(e2e));
    assert!(tests.len() >= 9, "{tests:?}");
    for name in tests {
        assert!(
            has(e2e, &name),
            "{e2e} › {name} has no row in docs/RELIABILITY.md"
        );
    }
    let campaign = read("fuzz/tests/campaign.rs");
    for name in campaign
        .split("campaign(\"")
        .skip(1)
        .filter_map(|s| s.split_once('"'))
    {
        assert!(
            has("fuzz/tests/campaign.rs", name.0),
            "the fuzz target {} has no row in docs/RELIABILITY.md",
            name.0
        );
    }
}
