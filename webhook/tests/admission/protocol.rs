//! The review protocol: 503 before the caches have listed, 400 for a body that is no review.

use super::*;

#[tokio::test]
async fn before_the_caches_have_listed_a_scaled_object_review_gets_503() {
    let webhook = Webhook::serve(Arc::new(Caches::new()), CancellationToken::new()).await;
    let so = scaled_object("orders", "orders", redis());
    match webhook
        .post(SCALED_OBJECT_PATH, &review("CREATE", &so, None, false))
        .await
    {
        Err(kube::Error::Api(status)) => assert_eq!(status.code, 503),
        other => panic!("expected 503, got {other:?}"),
    }
    // Rules that need no cache are answered at once.
    let ta = json!({"apiVersion": "keda.sh/v1alpha1", "kind": "TriggerAuthentication",
        "metadata": {"name": "a", "namespace": "team"}, "spec": {}});
    allowed(
        &webhook
            .answer(
                TRIGGER_AUTHENTICATION_PATH,
                &review("CREATE", &ta, None, false),
            )
            .await,
        "a TriggerAuthentication",
    );
}

#[tokio::test]
async fn a_body_that_is_no_admission_review_gets_400() {
    let kube = cluster();
    let webhook = Webhook::start(&kube).await;
    match webhook.post(SCALED_OBJECT_PATH, &json!({"hello": 1})).await {
        Err(kube::Error::Api(status)) => assert_eq!(status.code, 400),
        other => panic!("expected 400, got {other:?}"),
    }
}
