//! The committed CRDs are accepted by a real API server, and so is every valid fixture.
//! Run against a cluster named by KEDA_RS_E2E_KUBECONFIG (see the crate docs).

use std::time::Duration;

use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use keda_e2e::{FIELD_MANAGER, REPLACE_CRDS_ENV, cluster_client, repo_root, yaml_documents};
use kube::api::{DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::discovery::pinned_kind;
use kube::runtime::wait::{await_condition, conditions};
use kube::{Api, Client, ResourceExt};

async fn install_crds(client: &Client) -> Vec<String> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let docs = yaml_documents(&repo_root().join("config/crd")).expect("config/crd is readable");
    assert!(!docs.is_empty(), "config/crd holds no CRD");
    let replace = std::env::var(REPLACE_CRDS_ENV).is_ok_and(|v| v == "true");
    let mut names = Vec::new();
    for (file, doc) in docs {
        if doc["kind"] != "CustomResourceDefinition" {
            continue;
        }
        let crd: CustomResourceDefinition =
            serde_json::from_value(doc).unwrap_or_else(|e| panic!("{file}: not a CRD: {e}"));
        let name = crd.name_any();
        if let Some(existing) = crds.get_opt(&name).await.expect("CRDs can be read") {
            let ours = existing
                .managed_fields()
                .iter()
                .any(|m| m.manager.as_deref() == Some(FIELD_MANAGER));
            assert!(
                ours || replace,
                "the cluster already has CRD {name}, not installed by this suite (a KEDA \
                 installation?); use a throwaway cluster or set {REPLACE_CRDS_ENV}=true"
            );
        }
        // `kubectl apply --dry-run=server`: the server validates the CRD without storing it.
        let dry = PatchParams::apply(FIELD_MANAGER).force().dry_run();
        crds.patch(&name, &dry, &Patch::Apply(&crd))
            .await
            .unwrap_or_else(|e| panic!("{file}: server-side dry run rejected CRD {name}: {e}"));
        crds.patch(
            &name,
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(&crd),
        )
        .await
        .unwrap_or_else(|e| panic!("{file}: applying CRD {name} failed: {e}"));
        names.push(name);
    }
    for name in &names {
        tokio::time::timeout(
            Duration::from_secs(60),
            await_condition(crds.clone(), name, conditions::is_crd_established()),
        )
        .await
        .unwrap_or_else(|_| panic!("CRD {name} not Established within 60 s"))
        .expect("watching the CRD works");
    }
    names
}

#[tokio::test]
#[ignore = "end-to-end: needs a real cluster named by KEDA_RS_E2E_KUBECONFIG"]
async fn committed_crds_and_every_valid_fixture_are_accepted_by_a_real_api_server() {
    let client = cluster_client().await.expect("a cluster to test against");
    let installed = install_crds(&client).await;
    assert_eq!(
        installed.len(),
        4,
        "expected the four keda.sh CRDs, got {installed:?}"
    );

    let ns_name = format!("keda-rs-e2e-crds-{}", std::process::id());
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let ns: Namespace = serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns_name}
    }))
    .expect("a namespace");
    namespaces
        .create(&PostParams::default(), &ns)
        .await
        .expect("namespace created");

    let mut rejected = Vec::new();
    let mut accepted = 0;
    for kind_dir in ["scaledobject", "scaledjob", "triggerauthentication"] {
        let dir = repo_root()
            .join("tests/fixtures")
            .join(kind_dir)
            .join("valid");
        for (file, doc) in yaml_documents(&dir).expect("fixtures are readable") {
            let mut obj: DynamicObject =
                serde_json::from_value(doc).unwrap_or_else(|e| panic!("{file}: {e}"));
            let gvk = obj
                .types
                .as_ref()
                .map(kube::api::GroupVersionKind::try_from)
                .unwrap_or_else(|| panic!("{file}: no apiVersion/kind"))
                .unwrap_or_else(|e| panic!("{file}: {e}"));
            let (resource, caps) = pinned_kind(&client, &gvk)
                .await
                .unwrap_or_else(|e| panic!("{file}: kind {gvk:?} is not served: {e}"));
            let api: Api<DynamicObject> = if caps.scope == kube::discovery::Scope::Namespaced {
                obj.metadata.namespace = Some(ns_name.clone());
                Api::namespaced_with(client.clone(), &ns_name, &resource)
            } else {
                Api::all_with(client.clone(), &resource)
            };
            let dry = PostParams {
                dry_run: true,
                ..PostParams::default()
            };
            match api.create(&dry, &obj).await {
                Ok(_) => accepted += 1,
                Err(e) => rejected.push(format!("{file}: {e}")),
            }
        }
    }
    namespaces
        .delete(&ns_name, &DeleteParams::default())
        .await
        .expect("namespace deleted");
    assert!(
        rejected.is_empty(),
        "valid fixtures rejected by the API server:\n{}",
        rejected.join("\n")
    );
    assert!(accepted > 0, "no valid fixture was found");
}
