//! The controller shell both kinds share: the ScaledObject controller ([`crate::scaled_object::controller`])
//! and the ScaledJob controller ([`crate::scaled_job`]) are this shell over a [`Reconciler`]
//! that says what differs (what a reconcile applies, what a deletion cleans up, how a failure
//! is reported).
//!
//! Written once here: the watch of the objects (managed fields dropped, reconciles only on
//! [`reconcile_trigger`] changes), the rebuild signals of the trigger resolver, KEDA's
//! finalizer, the isolation of a reconcile that panics, the report of a failed apply, the
//! opening of the first-poll gate of a loop the reconcile started
//! ([`crate::shared::loops::Loops::reconciled`]), the retry policy, and the shutdown.

use std::fmt::Debug;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Arc;
use std::time::Duration;

use futures::{FutureExt, Stream, StreamExt, TryStreamExt};
use k8s_openapi::NamespaceResourceScope;
use keda_api::ScaleTrigger;
use keda_api::annotations::FINALIZER;
use kube::api::Api;
use kube::runtime::controller::{Action, Config, Controller};
use kube::runtime::finalizer::{self, Event as Finalizer, finalizer};
use kube::runtime::reflector::{ObjectRef, Store, store::Writer};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::process::telemetry::{Metrics, ResourceKind};
use crate::shared::auth_status::{self, Users};
use crate::shared::isolation::{Component, InternalError, catch_panic};
use crate::shared::loops::{LoopKind, Loops};
use crate::shared::recording;
use crate::shared::resolve::{Resolver, ScalableRef, WatchScope};
use crate::shared::watch::scoped_watcher;

/// The object types a controller of this shell reconciles.
pub(crate) trait Object:
    Resource<DynamicType = (), Scope = NamespaceResourceScope>
    + Clone
    + Debug
    + DeserializeOwned
    + Serialize
    + Send
    + Sync
    + 'static
{
}

impl<K> Object for K where
    K: Resource<DynamicType = (), Scope = NamespaceResourceScope>
        + Clone
        + Debug
        + DeserializeOwned
        + Serialize
        + Send
        + Sync
        + 'static
{
}

/// What a controller of one kind does in a reconcile; the shell around it is [`reconcile`] and
/// [`run`].
pub(crate) trait Reconciler: Send + Sync + 'static {
    /// `ScaledObject` or `ScaledJob`.
    type Object: Object;
    /// Why a reconcile failed.
    type Error: std::error::Error + Send + Sync + 'static;
    /// The kind, for messages.
    const KIND: ResourceKind;

    /// The controller's client.
    fn client(&self) -> &Client;

    /// Where the Prometheus metrics are recorded.
    fn metrics(&self) -> &Metrics;

    /// The trigger resolver (its caches hold the TriggerAuthentications).
    fn resolver(&self) -> &Resolver;

    /// The object's `spec.triggers`.
    fn triggers(object: &Self::Object) -> &[ScaleTrigger];

    /// A panic caught in a reconcile, as this kind's error.
    fn internal(error: InternalError) -> Self::Error;

    /// A failure of the finalizer machinery, as this kind's error.
    fn finalizer_failed(error: finalizer::Error<Self::Error>) -> Self::Error;

    /// The object to reconcile, before the finalizer is looked at: `object` itself by default.
    fn prepare(
        &self,
        object: Arc<Self::Object>,
    ) -> impl Future<Output = Result<Arc<Self::Object>, Self::Error>> + Send {
        std::future::ready(Ok(object))
    }

    /// Reconciles a live object (it has the finalizer).
    fn apply(
        &self,
        object: &Self::Object,
    ) -> impl Future<Output = Result<Action, Self::Error>> + Send;

    /// Cleans up after a deleted object (before its finalizer is removed).
    fn cleanup(
        &self,
        object: &Self::Object,
    ) -> impl Future<Output = Result<Action, Self::Error>> + Send;

    /// Says on the object that its reconcile failed (`Ready=False`, an Event, the counters).
    fn report_failure(
        &self,
        object: &Self::Object,
        error: &Self::Error,
    ) -> impl Future<Output = ()> + Send;

    /// The reconcile of `uid` finished, however it ended.
    fn reconciled(&self, uid: &str);

    /// The delay before a failed reconcile is retried.
    fn retry_after_error(&self) -> Duration;

    /// Which objects this replica writes for.
    fn shards(&self) -> &crate::shared::ownership::Shards;

    /// Lets go of an object owned by another replica ([`crate::shared::loops::Loops::let_go`]):
    /// when to look again.
    fn let_go(
        &self,
        object: &Self::Object,
        linger: Duration,
    ) -> impl Future<Output = Option<Duration>> + Send;

    /// The object of `uid` is owned here.
    fn owned(&self, uid: &str);
}

/// One reconcile, isolated: a panic anywhere in it becomes this object's `Ready=False
/// InternalError` (counted, logged, retried like any failure), never the controller's end.
pub(crate) async fn reconcile<C: Reconciler>(
    object: Arc<C::Object>,
    ctx: Arc<C>,
) -> Result<Action, C::Error> {
    let result = match catch_panic(reconcile_object(object.clone(), &ctx)).await {
        Ok(result) => result,
        Err(panic) => {
            let error = C::internal(panic.during(
                Component::Reconcile,
                format!(
                    "reconciling {} {}/{}",
                    C::KIND.kind(),
                    object.namespace().unwrap_or_default(),
                    object.name_any()
                ),
            ));
            ctx.report_failure(&object, &error).await;
            Err(error)
        }
    };
    // After this reconcile's status write: a loop it started may now poll and write its own.
    ctx.reconciled(&object.uid().unwrap_or_default());
    result
}

async fn reconcile_object<C: Reconciler>(
    object: Arc<C::Object>,
    ctx: &Arc<C>,
) -> Result<Action, C::Error> {
    let namespace = object.namespace().unwrap_or_default();
    let name = object.name_any();
    // Shards: nothing is written for an object another replica owns (or while this one is
    // fenced); a change of ownership reconciles every object again.
    let shards = ctx.shards();
    if !shards.owns(&namespace, &name) {
        // Looked at again after the linger even without a change of ownership: a bulk
        // reconcile that did not reach an object (it was queued behind a running one) cannot
        // leave it without an owner for longer than that.
        let linger = shards.linger();
        let again = ctx.let_go(&object, linger).await.unwrap_or(linger);
        return Ok(Action::requeue(again.max(Duration::from_secs(1))));
    }
    ctx.owned(&object.uid().unwrap_or_default());
    let kind = C::KIND.custom_resource();
    // Counted at every reconcile of a live object, whatever the reconcile then finds (paused,
    // failing): KEDA's updatePromMetrics runs first.
    if object.meta().deletion_timestamp.is_none() {
        let types: Vec<&str> = C::triggers(&object)
            .iter()
            .map(|t| t.type_.as_str())
            .collect();
        recording::resource_registered(
            ctx.metrics(),
            kind,
            (&namespace, &name),
            object.meta().uid.as_deref(),
            &types,
        );
    }
    let object = ctx.prepare(object).await?;
    let api: Api<C::Object> = Api::namespaced(ctx.client().clone(), &namespace);
    let names = (namespace.as_str(), name.as_str());
    finalizer(&api, FINALIZER, object, |event| async move {
        match event {
            Finalizer::Apply(object) => {
                let result = ctx.apply(&object).await;
                if let Err(e) = &result {
                    ctx.report_failure(&object, e).await;
                }
                // As KEDA: at the end of every reconcile of a live object, failed or not.
                auth_users::<C>(ctx, &object, names, Users::Add).await;
                result
            }
            Finalizer::Cleanup(object) => {
                let action = ctx.cleanup(&object).await?;
                auth_users::<C>(ctx, &object, names, Users::Remove).await;
                recording::resource_unregistered(
                    ctx.metrics(),
                    kind,
                    names,
                    object.meta().uid.as_deref(),
                );
                Ok(action)
            }
        }
    })
    .await
    .map_err(C::finalizer_failed)
}

/// Lists (or unlists) the object in the status of the (Cluster)TriggerAuthentications its
/// triggers use ([`auth_status`]).
async fn auth_users<C: Reconciler>(ctx: &C, object: &C::Object, names: (&str, &str), users: Users) {
    auth_status::update(
        ctx.client(),
        ctx.resolver(),
        C::KIND,
        names,
        C::triggers(object),
        users,
    )
    .await;
}

fn error_policy<C: Reconciler>(_object: Arc<C::Object>, _e: &C::Error, ctx: Arc<C>) -> Action {
    Action::requeue(ctx.retry_after_error())
}

/// The changes of a ScaledObject or ScaledJob that need a reconcile: generation, labels,
/// annotations, finalizers, deletion. Status changes are not among them.
pub(crate) fn reconcile_trigger<K: Resource>(obj: &K) -> Option<u64> {
    let meta = obj.meta();
    let mut h = DefaultHasher::new();
    meta.generation.hash(&mut h);
    meta.labels.hash(&mut h);
    meta.annotations.hash(&mut h);
    meta.finalizers.hash(&mut h);
    meta.deletion_timestamp.is_some().hash(&mut h);
    Some(h.finish())
}

/// The objects of one kind as the controller reconciles them: watched in `scope`, shaped by
/// `cached` (managed fields are always dropped) and kept in `writer`, each event shown to
/// `observe` once the store has it, filtered by [`reconcile_trigger`].
pub(crate) fn watch_objects<K: Object>(
    client: &Client,
    scope: &WatchScope,
    label_selector: Option<&str>,
    store: Store<K>,
    writer: Writer<K>,
    cached: fn(&mut K),
    mut observe: impl FnMut(&watcher::Event<K>) + Send + 'static,
) -> impl Stream<Item = Result<K, watcher::Error>> + Send + 'static {
    scoped_watcher(client, scope, &object_watch_config(label_selector), store)
        .modify(move |o: &mut K| {
            // Nothing reads managedFields; on a real API server they are often the largest
            // part of an object, kept 10,000 times over.
            o.meta_mut().managed_fields = None;
            cached(o);
        })
        .reflect(writer)
        .map_ok(move |event| {
            observe(&event);
            event
        })
        .applied_objects()
        .predicate_filter(reconcile_trigger, Default::default())
}

/// How ScaledObjects and ScaledJobs are watched: every one, or only those matching
/// `label_selector` (`WATCH_LABEL_SELECTOR`), as KEDA filters its cache.
fn object_watch_config(label_selector: Option<&str>) -> watcher::Config {
    let config = watcher::Config::default().any_semantic();
    match label_selector {
        Some(selector) => config.labels(selector),
        None => config,
    }
}

/// The objects of `loops`' kind whose triggers' inputs changed (a rotated Secret, an edited
/// TriggerAuthentication): each loop is marked for a rebuild first, so the reconcile that
/// follows restarts it with fresh scalers.
pub(crate) fn rebuilds<K>(
    resolver: &Resolver,
    loops: Loops<K>,
) -> impl Stream<Item = ObjectRef<K::Object>> + Send + 'static
where
    K: LoopKind,
{
    let kind = match K::KIND {
        ResourceKind::ScaledObject => keda_scalers::ScalableKind::ScaledObject,
        ResourceKind::ScaledJob => keda_scalers::ScalableKind::ScaledJob,
    };
    resolver.rebuilds_of::<K::Object, _, _>(kind, move |r: ScalableRef| {
        let loops = loops.clone();
        async move { loops.rebuild(&r.namespace, &r.name).await }
    })
}

/// How [`run`] runs a controller.
pub(crate) struct RunConfig {
    /// Reconciles at once.
    pub concurrency: u16,
    /// How long running reconciles may take to finish at shutdown; `None`: as long as they
    /// take.
    pub shutdown_grace: Option<Duration>,
}

/// Runs `controller` with `ctx` until `shutdown` is cancelled, then stops every loop of
/// `loops`. `store` is the controller's reflector.
pub(crate) async fn run<C, K>(
    controller: Controller<C::Object>,
    ctx: Arc<C>,
    store: Store<C::Object>,
    loops: &Loops<K>,
    config: RunConfig,
    shutdown: CancellationToken,
) where
    C: Reconciler,
    K: LoopKind<Object = C::Object>,
{
    let kind = C::KIND.kind();
    let run = controller
        .with_config(Config::default().concurrency(config.concurrency))
        .graceful_shutdown_on(shutdown.clone().cancelled_owned())
        .run(reconcile::<C>, error_policy::<C>, ctx)
        .for_each(|r| async move {
            if let Err(e) = r {
                tracing::debug!(error = %e, kind, "reconcile failed");
            }
        });
    // kube's controller waits for its first list before it notices the shutdown; when the
    // objects were never listed (no CRD, no RBAC) nothing is in flight: stop at once. Else
    // running reconciles may finish, within the grace period if there is one.
    let forceful = async {
        shutdown.cancelled().await;
        if store.wait_until_ready().now_or_never().is_some() {
            match config.shutdown_grace {
                Some(grace) => tokio::time::sleep(grace).await,
                None => std::future::pending::<()>().await,
            }
        } else {
            warn!(kind, "stopping before the objects could ever be listed");
        }
    };
    tokio::select! {
        () = run => {}
        () = forceful => {}
    }
    loops.stop_all().await;
    info!(kind, "controller stopped");
}
