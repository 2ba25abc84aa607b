//! The metrics-apiserver's reading of the HPA's `labelSelector`
//! (`keda_metrics_apiserver::selector::scaled_object_name`) from arbitrary text.
//!
//! Checks beyond "no panic": a name found is not empty, has no surrounding blanks, is part of
//! the selector, comes from a requirement on `scaledobject.keda.sh/name` and holds no comma
//! that separates requirements.
#![no_main]

use keda_metrics_apiserver::selector::scaled_object_name;
use libfuzzer_sys::fuzz_target;

const KEY: &str = "scaledobject.keda.sh/name";

fuzz_target!(|data: &[u8]| {
    let selector = String::from_utf8_lossy(data);
    match scaled_object_name(Some(&selector)) {
        Ok(name) => {
            assert!(!name.is_empty(), "an empty name from {selector:?}");
            assert_eq!(
                name.trim(),
                name,
                "blanks around the name from {selector:?}"
            );
            assert!(
                selector.contains(name.as_str()),
                "{name:?} is not in {selector:?}"
            );
            assert!(
                selector.contains(KEY),
                "{name:?} from {selector:?}, which does not name {KEY}"
            );
            // A comma can only be inside parentheses, where the requirements are not split
            // (the name is then not a valid label value, and no ScaledObject has it).
            let mut depth = 0_i32;
            for c in name.chars() {
                match c {
                    '(' => depth += 1,
                    ')' => depth = (depth - 1).max(0),
                    ',' => assert!(depth > 0, "two names in {name:?} from {selector:?}"),
                    _ => {}
                }
            }
        }
        Err(error) => assert!(!error.to_string().is_empty()),
    }
});
