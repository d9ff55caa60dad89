//! docs/RULES.md is the catalog as the library renders it
//! (`rules_markdown`): a rule's thresholds or its silent cases change in
//! its file, and the page follows by regeneration, never by hand.

/// With IOSLEUTH_UPDATE_GOLDEN set (scripts/update-golden sets it), writes
/// the page; otherwise the committed page must be the generated one.
#[test]
fn docs_rules_md_is_the_catalog() {
    let path = "docs/RULES.md";
    let got = iosleuth::testing::rules_markdown();
    if std::env::var_os("IOSLEUTH_UPDATE_GOLDEN").is_some() {
        std::fs::write(path, &got).unwrap();
        return;
    }
    let want = std::fs::read_to_string(path).unwrap_or_default();
    assert!(
        want == got,
        "{path} is not the catalog as the code states it; regenerate it with \
         `IOSLEUTH_UPDATE_GOLDEN=1 cargo test --release --test offline rules_doc` \
         (or scripts/update-golden) and commit it"
    );
}
