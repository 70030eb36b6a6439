//! docs/EMBED.md's settings tables against the parsers the widgets use: every documented setting
//! is read with its example (no warning, and a visible change), its rejected example is reported,
//! and every setting a parser reads is documented.
#![cfg(not(target_arch = "wasm32"))]

use moescope_app::{labs, rack_state, sandbox_state};

struct Row {
    key: String,
    example: String,
    rejected: String,
}

/// The rows of the table under `heading`: `| `key` | values | `example` | `rejected` |`.
fn table(heading: &str) -> Vec<Row> {
    let doc = include_str!("../../docs/EMBED.md");
    let section = doc
        .split(heading)
        .nth(1)
        .unwrap_or_else(|| panic!("docs/EMBED.md has no {heading}"));
    let section = section.split("\n#").next().unwrap_or("");
    section
        .lines()
        .filter(|l| l.starts_with("| `"))
        .map(|l| {
            let cells: Vec<String> = l
                .trim_matches('|')
                .split(" | ")
                .map(|c| c.trim().trim_matches('`').to_owned())
                .collect();
            assert_eq!(cells.len(), 4, "{l}");
            Row {
                key: cells[0].clone(),
                example: cells[2].clone(),
                rejected: cells[3].clone(),
            }
        })
        .collect()
}

fn documented(rows: &[Row], keys: &[&str]) {
    let mut doc: Vec<&str> = rows.iter().map(|r| r.key.as_str()).collect();
    let mut keys = keys.to_vec();
    doc.sort_unstable();
    keys.sort_unstable();
    assert_eq!(doc, keys, "docs/EMBED.md's rows and the parser's settings");
}

#[test]
fn every_rack_setting_in_embed_md_is_read_and_checked() {
    let rows = table("### Rack widgets");
    documented(&rows, &rack_state::KEYS);
    for r in &rows {
        // `preset` chooses the starting point; the others change the b200-maverick preset.
        let base = if r.key == "preset" {
            String::new()
        } else {
            "preset=b200-maverick".to_owned()
        };
        let with = |value: &str| rack_state::parse(&format!("{base}&{}={value}", r.key));
        let (before, _) = rack_state::parse(&base);
        let (after, warnings) = with(&r.example);
        assert!(warnings.is_empty(), "{}={}: {warnings:?}", r.key, r.example);
        if r.key != "v" {
            assert_ne!(after, before, "{}={} changes nothing", r.key, r.example);
        }
        let (kept, warnings) = with(&r.rejected);
        assert_eq!(warnings.len(), 1, "{}={}: {warnings:?}", r.key, r.rejected);
        assert!(warnings[0].contains(&r.rejected), "{warnings:?}");
        if r.key != "preset" {
            assert_eq!(
                kept, before,
                "a rejected {} keeps the preset's value",
                r.key
            );
        }
    }
}

#[test]
fn every_sandbox_setting_in_embed_md_is_read_and_checked() {
    let rows = table("### Sandbox widgets");
    documented(&rows, &sandbox_state::KEYS);
    let (default, _) = sandbox_state::parse("");
    for r in &rows {
        let (after, warnings) = sandbox_state::parse(&format!("{}={}", r.key, r.example));
        assert!(warnings.is_empty(), "{}={}: {warnings:?}", r.key, r.example);
        if r.key != "v" {
            assert_ne!(after, default, "{}={} changes nothing", r.key, r.example);
        }
        let (kept, warnings) = sandbox_state::parse(&format!("{}={}", r.key, r.rejected));
        assert_eq!(warnings.len(), 1, "{}={}: {warnings:?}", r.key, r.rejected);
        assert!(warnings[0].contains(&r.key), "{warnings:?}");
        assert_eq!(kept, default);
    }
}

#[test]
fn every_lab_setting_in_embed_md_is_read_and_checked() {
    let rows = table("### Lab widget");
    documented(&rows, &labs::STATE_KEYS);
    let shipped: Vec<labs::Lab> = labs::SHIPPED
        .iter()
        .map(|t| labs::parse(t).unwrap())
        .collect();
    let (default, _) = labs::parse_state("", &shipped);
    for r in &rows {
        let (after, warnings) = labs::parse_state(&format!("{}={}", r.key, r.example), &shipped);
        assert!(warnings.is_empty(), "{}={}: {warnings:?}", r.key, r.example);
        if r.key != "v" {
            assert_ne!(after, default, "{}={} changes nothing", r.key, r.example);
        }
        let (kept, warnings) = labs::parse_state(&format!("{}={}", r.key, r.rejected), &shipped);
        assert_eq!(warnings.len(), 1, "{}={}: {warnings:?}", r.key, r.rejected);
        assert!(warnings[0].contains(&r.rejected), "{warnings:?}");
        assert_eq!(kept, default);
    }
    // The lab row lists every shipped lab.
    let doc = include_str!("../../docs/EMBED.md");
    for lab in &shipped {
        assert!(
            doc.contains(&format!("`{}`", lab.id)),
            "{} is not in docs/EMBED.md",
            lab.id
        );
    }
}
