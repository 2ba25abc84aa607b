//! The committed `config/crd/*.yaml` must be exactly what the types generate.

use std::path::Path;

#[test]
fn committed_crds_match_the_generated_ones() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../config/crd");
    for crd in keda_api::crd::all() {
        let file = keda_api::crd::file_name(&crd);
        let generated = keda_api::crd::to_yaml(&crd).expect("CRD serializes");
        let committed = std::fs::read_to_string(dir.join(&file)).unwrap_or_default();
        assert!(
            committed == generated,
            "config/crd/{file} is out of date with the types in api/; regenerate it with `{}` (run from the repository root)",
            keda_api::crd::REGENERATE_COMMAND
        );
    }
}
