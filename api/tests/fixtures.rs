//! Walks `tests/fixtures/{scaledobject,scaledjob,triggerauthentication}/{valid,invalid}/*.yaml`.
//!
//! - valid: deserializes into the typed object, serializes back to exactly the same JSON value
//!   (nothing lost, nothing added), and passes validation;
//! - invalid: the first line is `# expect-error: <message>`, and deserialization or validation
//!   fails with exactly that message.
//!
//! All failures are collected and reported together.

use std::fmt::Display;
use std::path::{Path, PathBuf};

use keda_api::validation::{
    validate_cluster_trigger_authentication, validate_scaled_job, validate_scaled_object_admission,
    validate_trigger_authentication,
};
use keda_api::{ClusterTriggerAuthentication, ScaledJob, ScaledObject, TriggerAuthentication};
use serde::Serialize;
use serde::de::DeserializeOwned;

const EXPECT_PREFIX: &str = "# expect-error: ";

fn fixtures_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures")
}

fn yaml_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
        .map(|entry| entry.expect("readable directory entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    files
}

/// Deserializes, checks the lossless round trip when `check_round_trip`, then validates.
fn load_and_validate<T, E>(
    text: &str,
    validate: fn(&T) -> Result<(), E>,
    check_round_trip: bool,
) -> Result<(), String>
where
    T: DeserializeOwned + Serialize,
    E: Display,
{
    let typed: T = serde_yaml::from_str(text).map_err(|e| e.to_string())?;
    if check_round_trip {
        let original: serde_json::Value = serde_yaml::from_str(text).map_err(|e| e.to_string())?;
        let back = serde_json::to_value(&typed).map_err(|e| e.to_string())?;
        if back != original {
            return Err(format!(
                "round trip changed the object:\n  original: {original}\n  after:    {back}"
            ));
        }
    }
    validate(&typed).map_err(|e| e.to_string())
}

fn check(kind_dir: &str, path: &Path, text: &str, check_round_trip: bool) -> Result<(), String> {
    match kind_dir {
        "scaledobject" => load_and_validate::<ScaledObject, _>(
            text,
            validate_scaled_object_admission,
            check_round_trip,
        ),
        "scaledjob" => {
            load_and_validate::<ScaledJob, _>(text, validate_scaled_job, check_round_trip)
        }
        "triggerauthentication" => {
            let kind: serde_yaml::Value = serde_yaml::from_str(text).map_err(|e| e.to_string())?;
            match kind.get("kind").and_then(serde_yaml::Value::as_str) {
                Some("ClusterTriggerAuthentication") => {
                    load_and_validate::<ClusterTriggerAuthentication, _>(
                        text,
                        validate_cluster_trigger_authentication,
                        check_round_trip,
                    )
                }
                _ => load_and_validate::<TriggerAuthentication, _>(
                    text,
                    validate_trigger_authentication,
                    check_round_trip,
                ),
            }
        }
        other => Err(format!("{}: unknown fixture kind {other}", path.display())),
    }
}

#[test]
fn every_fixture_behaves_as_its_folder_says() {
    let root = fixtures_root();
    let mut failures = Vec::new();
    let mut counted = 0;
    for kind in ["scaledobject", "scaledjob", "triggerauthentication"] {
        for path in yaml_files(&root.join(kind).join("valid")) {
            counted += 1;
            let text = std::fs::read_to_string(&path).expect("readable fixture");
            if let Err(e) = check(kind, &path, &text, true) {
                failures.push(format!("{}: expected valid, got: {e}", path.display()));
            }
        }
        for path in yaml_files(&root.join(kind).join("invalid")) {
            counted += 1;
            let text = std::fs::read_to_string(&path).expect("readable fixture");
            let Some(expected) = text
                .lines()
                .next()
                .and_then(|l| l.strip_prefix(EXPECT_PREFIX))
            else {
                failures.push(format!(
                    "{}: first line must be `{EXPECT_PREFIX}<message>`",
                    path.display()
                ));
                continue;
            };
            match check(kind, &path, &text, false) {
                Ok(()) => failures.push(format!(
                    "{}: expected error {expected:?}, got none",
                    path.display()
                )),
                Err(actual) if actual == expected => {}
                Err(actual) => failures.push(format!(
                    "{}:\n  expected: {expected}\n  actual:   {actual}",
                    path.display()
                )),
            }
        }
    }
    assert!(counted > 0, "no fixtures found under {}", root.display());
    assert!(
        failures.is_empty(),
        "{} fixture(s) failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
