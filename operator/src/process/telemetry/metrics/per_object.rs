//! The series every ScaledObject and ScaledJob has, kept per object in one record and encoded
//! as KEDA's families at scrape time: `keda_scaler_metrics_value`,
//! `keda_scaler_metrics_latency_seconds`, `keda_scaler_active`, `keda_scaler_detail_errors_total`,
//! `keda_scaled_object_errors_total`, `keda_scaled_job_errors_total`,
//! `keda_scaled_object_paused` and `keda_internal_scale_loop_latency_seconds`.
//!
//! A prometheus-client `Family` per metric kept a hash-table entry, a copy of the label set and
//! an `Arc` per series, and a record of each object's label sets beside them so they could be
//! deleted: about 1.2 KB more per object than this (measured at 100,000 objects,
//! docs/benchmarks.md "Fifth round"), for eight numbers. Here an object is one
//! entry (its name) in the map of its namespace, with its triggers' series in an exact-size
//! vector; a series that was never recorded is not exposed, as a `Family` exposes only the label
//! sets it was asked for.

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};
use std::sync::{Arc, PoisonError, RwLock, RwLockReadGuard};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::MetricType;

use super::labels::{LoopLabels, ObjectLabels, ResourceKind, ScalerSet, TriggerKey};

/// Which of a record's numbers have been recorded (bits of [`Values::set`]).
const VALUE: u8 = 1;
const LATENCY: u8 = 1 << 1;
const ACTIVE: u8 = 1 << 2;
const ERRORS: u8 = 1 << 3;
const PAUSED: u8 = 1 << 4;
const LOOP_LAG: u8 = 1 << 5;

/// Numbers recorded through a shared reference: gauges as `f64` bits, counters as integers,
/// and which of them exist.
#[derive(Debug)]
struct Values<const N: usize> {
    numbers: [AtomicU64; N],
    set: AtomicU8,
}

impl<const N: usize> Default for Values<N> {
    fn default() -> Self {
        Self {
            numbers: std::array::from_fn(|_| AtomicU64::new(0)),
            set: AtomicU8::new(0),
        }
    }
}

impl<const N: usize> Values<N> {
    fn gauge(&self, slot: usize, flag: u8, value: f64) {
        self.numbers[slot].store(value.to_bits(), Ordering::Relaxed);
        self.set.fetch_or(flag, Ordering::Release);
    }

    fn count(&self, slot: usize, flag: u8, by: u64) {
        self.numbers[slot].fetch_add(by, Ordering::Relaxed);
        self.set.fetch_or(flag, Ordering::Release);
    }

    fn has(&self, flag: u8) -> bool {
        self.set.load(Ordering::Acquire) & flag != 0
    }

    fn gauge_value(&self, slot: usize, flag: u8) -> Option<f64> {
        self.has(flag)
            .then(|| f64::from_bits(self.numbers[slot].load(Ordering::Relaxed)))
    }

    fn counter_value(&self, slot: usize, flag: u8) -> Option<u64> {
        self.has(flag)
            .then(|| self.numbers[slot].load(Ordering::Relaxed))
    }

    fn clear(&self, flags: u8) {
        self.set.fetch_and(!flags, Ordering::AcqRel);
    }
}

/// Where a trigger's numbers are in its [`Values`] (an object's are `OBJECT_*`).
const TRIGGER_VALUE: usize = 0;
const TRIGGER_LATENCY: usize = 1;
const TRIGGER_ACTIVE: usize = 2;
const TRIGGER_ERRORS: usize = 3;

/// One trigger's series: value, latency, active (gauges) and detail errors (counter).
#[derive(Debug)]
struct TriggerSeries {
    scaler: Arc<str>,
    metric: Arc<str>,
    trigger_index: usize,
    values: Values<4>,
}

impl TriggerSeries {
    fn matches(&self, key: &TriggerKey<'_>) -> bool {
        self.trigger_index == key.trigger_index
            && *self.metric == *key.metric
            && key.scaler.is(&self.scaler)
    }
}

/// One object's series: its triggers', its error counter, whether it is paused, its loop's lag.
#[derive(Debug, Default)]
struct ObjectSeries {
    triggers: Vec<TriggerSeries>,
    /// Errors (counter), paused (gauge), loop lag (gauge).
    values: Values<3>,
}

const OBJECT_ERRORS: usize = 0;
const OBJECT_PAUSED: usize = 1;
const OBJECT_LOOP_LAG: usize = 2;

/// Objects by namespace, then name.
type Namespaces = HashMap<Arc<str>, HashMap<Box<str>, ObjectSeries>>;

/// The per-object series of both kinds of scaled resources.
#[derive(Debug, Default)]
pub(super) struct PerObject {
    /// ScaledObjects, then ScaledJobs.
    kinds: [RwLock<Namespaces>; 2],
}

fn slot(kind: ResourceKind) -> usize {
    match kind {
        ResourceKind::ScaledObject => 0,
        ResourceKind::ScaledJob => 1,
    }
}

impl PerObject {
    fn read(&self, kind: ResourceKind) -> RwLockReadGuard<'_, Namespaces> {
        self.kinds[slot(kind)]
            .read()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Runs `f` on the record of `namespace/name`, made first if it does not exist. Recording
    /// into an existing record takes only the read lock.
    fn with_object<R>(
        &self,
        kind: ResourceKind,
        namespace: &str,
        name: &str,
        f: impl Fn(&ObjectSeries) -> R,
    ) -> R {
        if let Some(object) = self.read(kind).get(namespace).and_then(|n| n.get(name)) {
            return f(object);
        }
        let mut kinds = self.kinds[slot(kind)]
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        let objects = match kinds.get_mut(namespace) {
            Some(objects) => objects,
            None => kinds.entry(Arc::from(namespace)).or_default(),
        };
        f(objects.entry(Box::from(name)).or_default())
    }

    /// Runs `f` on the series of the trigger `key` names, made first if it does not exist.
    /// Only making it copies the key's texts.
    fn with_trigger(&self, key: TriggerKey<'_>, f: impl Fn(&TriggerSeries)) {
        let found = self.with_object(key.kind, key.namespace, key.scaled_resource, |object| {
            object
                .triggers
                .iter()
                .find(|t| t.matches(&key))
                .map(&f)
                .is_some()
        });
        if found {
            return;
        }
        let mut kinds = self.kinds[slot(key.kind)]
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        let objects = match kinds.get_mut(key.namespace) {
            Some(objects) => objects,
            None => kinds.entry(Arc::from(key.namespace)).or_default(),
        };
        let object = objects.entry(Box::from(key.scaled_resource)).or_default();
        // Another recorder may have added it between the two locks.
        if let Some(known) = object.triggers.iter().find(|t| t.matches(&key)) {
            return f(known);
        }
        object.triggers.reserve_exact(1);
        object.triggers.push(TriggerSeries {
            scaler: key.scaler.to_arc(),
            metric: Arc::from(key.metric),
            trigger_index: key.trigger_index,
            values: Values::default(),
        });
        if let Some(added) = object.triggers.last() {
            f(added);
        }
    }

    pub(super) fn scaler_value(&self, key: TriggerKey<'_>, value: f64) {
        self.with_trigger(key, |t| t.values.gauge(TRIGGER_VALUE, VALUE, value));
    }

    pub(super) fn scaler_latency(&self, key: TriggerKey<'_>, seconds: f64) {
        self.with_trigger(key, |t| t.values.gauge(TRIGGER_LATENCY, LATENCY, seconds));
    }

    pub(super) fn scaler_active(&self, key: TriggerKey<'_>, active: bool) {
        let value = if active { 1.0 } else { 0.0 };
        self.with_trigger(key, |t| t.values.gauge(TRIGGER_ACTIVE, ACTIVE, value));
    }

    /// Adds `by` (0: makes the counter exist) to the trigger's detail errors.
    pub(super) fn scaler_errors(&self, key: TriggerKey<'_>, by: u64) {
        self.with_trigger(key, |t| t.values.count(TRIGGER_ERRORS, ERRORS, by));
    }

    /// Adds `by` (0: makes the counter exist) to the object's errors.
    pub(super) fn object_errors(&self, kind: ResourceKind, namespace: &str, name: &str, by: u64) {
        self.with_object(kind, namespace, name, |o| {
            o.values.count(OBJECT_ERRORS, ERRORS, by)
        });
    }

    pub(super) fn paused(&self, namespace: &str, name: &str, paused: bool) {
        let value = if paused { 1.0 } else { 0.0 };
        self.with_object(ResourceKind::ScaledObject, namespace, name, |o| {
            o.values.gauge(OBJECT_PAUSED, PAUSED, value)
        });
    }

    pub(super) fn loop_lag(&self, kind: ResourceKind, namespace: &str, name: &str, seconds: f64) {
        self.with_object(kind, namespace, name, |o| {
            o.values.gauge(OBJECT_LOOP_LAG, LOOP_LAG, seconds)
        });
    }

    /// Deletes the object's trigger series, its paused and loop-lag series; its error counter
    /// stays (as in KEDA), so the record stays only when that counter exists.
    pub(super) fn forget(&self, kind: ResourceKind, namespace: &str, name: &str) {
        let mut kinds = self.kinds[slot(kind)]
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        let Some(objects) = kinds.get_mut(namespace) else {
            return;
        };
        let Some(object) = objects.get_mut(name) else {
            return;
        };
        if object.values.has(ERRORS) {
            object.triggers = Vec::new();
            object.values.clear(PAUSED | LOOP_LAG);
            return;
        }
        objects.remove(name);
        if objects.is_empty() {
            kinds.remove(namespace);
        }
    }

    /// Whether any object has a series of `family`.
    fn any(&self, family: Which) -> bool {
        family.kinds().iter().any(|&kind| {
            self.read(kind)
                .values()
                .flat_map(HashMap::values)
                .any(|object| family.has(object))
        })
    }

    /// Writes one family: its descriptor, then every series, or nothing when there is none
    /// (a registry leaves out its empty families too).
    fn encode_family(&self, encoder: &mut DescriptorEncoder, family: Which) -> fmt::Result {
        if !self.any(family) {
            return Ok(());
        }
        let (name, help, metric_type) = family.descriptor();
        let mut out = encoder.encode_descriptor(name, help, None, metric_type)?;
        for &kind in family.kinds() {
            for (namespace, objects) in self.read(kind).iter() {
                for (name, object) in objects {
                    family.encode(&mut out, kind, namespace, name, object)?;
                }
            }
        }
        Ok(())
    }
}

impl Collector for PerObject {
    fn encode(&self, mut encoder: DescriptorEncoder) -> fmt::Result {
        for family in Which::ALL {
            self.encode_family(&mut encoder, family)?;
        }
        Ok(())
    }
}

/// One of the families kept here.
#[derive(Debug, Clone, Copy)]
enum Which {
    Value,
    Latency,
    Active,
    Paused,
    DetailErrors,
    ObjectErrors,
    JobErrors,
    LoopLag,
}

const BOTH: &[ResourceKind] = &[ResourceKind::ScaledObject, ResourceKind::ScaledJob];

impl Which {
    /// In the order KEDA's registry (and this one's, before) lists them.
    const ALL: [Which; 8] = [
        Which::Value,
        Which::Latency,
        Which::Active,
        Which::Paused,
        Which::DetailErrors,
        Which::ObjectErrors,
        Which::JobErrors,
        Which::LoopLag,
    ];

    /// Name (without `keda_`), help text (KEDA's, with the period a registry adds) and type.
    fn descriptor(self) -> (&'static str, &'static str, MetricType) {
        match self {
            Which::Value => (
                "scaler_metrics_value",
                "The current value for each scaler's metric that would be used by the HPA in computing the target average.",
                MetricType::Gauge,
            ),
            Which::Latency => (
                "scaler_metrics_latency_seconds",
                "The latency of retrieving current metric from each scaler, in seconds.",
                MetricType::Gauge,
            ),
            Which::Active => (
                "scaler_active",
                "Indicates whether a scaler is active (1), or not (0).",
                MetricType::Gauge,
            ),
            Which::Paused => (
                "scaled_object_paused",
                "Indicates whether a ScaledObject is paused (1), or not (0).",
                MetricType::Gauge,
            ),
            // Counters get their `_total` suffix from the encoder.
            Which::DetailErrors => (
                "scaler_detail_errors",
                "The total number of errors encountered for each scaler.",
                MetricType::Counter,
            ),
            Which::ObjectErrors => (
                "scaled_object_errors",
                "The number of errors that have occurred for each ScaledObject.",
                MetricType::Counter,
            ),
            Which::JobErrors => (
                "scaled_job_errors",
                "Number of scaled job errors.",
                MetricType::Counter,
            ),
            Which::LoopLag => (
                "internal_scale_loop_latency_seconds",
                "Total deviation (in seconds) between the expected execution time and the actual execution time for the scaling loop.",
                MetricType::Gauge,
            ),
        }
    }

    fn kinds(self) -> &'static [ResourceKind] {
        match self {
            Which::Paused | Which::ObjectErrors => &BOTH[..1],
            Which::JobErrors => &BOTH[1..],
            _ => BOTH,
        }
    }

    /// The trigger slot and flag of a per-trigger family.
    fn trigger_slot(self) -> Option<(usize, u8)> {
        match self {
            Which::Value => Some((TRIGGER_VALUE, VALUE)),
            Which::Latency => Some((TRIGGER_LATENCY, LATENCY)),
            Which::Active => Some((TRIGGER_ACTIVE, ACTIVE)),
            Which::DetailErrors => Some((TRIGGER_ERRORS, ERRORS)),
            _ => None,
        }
    }

    fn has(self, object: &ObjectSeries) -> bool {
        match self.trigger_slot() {
            Some((_, flag)) => object.triggers.iter().any(|t| t.values.has(flag)),
            None => object.values.has(match self {
                Which::Paused => PAUSED,
                Which::LoopLag => LOOP_LAG,
                _ => ERRORS,
            }),
        }
    }

    fn encode(
        self,
        out: &mut MetricEncoder<'_>,
        kind: ResourceKind,
        namespace: &str,
        name: &str,
        object: &ObjectSeries,
    ) -> fmt::Result {
        if let Some((slot, flag)) = self.trigger_slot() {
            for t in &object.triggers {
                let labels = ScalerSet {
                    namespace,
                    scaled_resource: name,
                    scaler: &t.scaler,
                    trigger_index: t.trigger_index,
                    metric: &t.metric,
                    kind,
                };
                if let Which::DetailErrors = self {
                    counter(out, &labels, t.values.counter_value(slot, flag))?;
                } else {
                    gauge(out, &labels, t.values.gauge_value(slot, flag))?;
                }
            }
            return Ok(());
        }
        let values = &object.values;
        match self {
            Which::Paused => gauge(
                out,
                &ObjectLabels::new(kind, namespace, name),
                values.gauge_value(OBJECT_PAUSED, PAUSED),
            ),
            Which::LoopLag => gauge(
                out,
                &LoopLabels {
                    namespace,
                    kind,
                    resource: name,
                },
                values.gauge_value(OBJECT_LOOP_LAG, LOOP_LAG),
            ),
            _ => counter(
                out,
                &ObjectLabels::new(kind, namespace, name),
                values.counter_value(OBJECT_ERRORS, ERRORS),
            ),
        }
    }
}

fn gauge(
    out: &mut MetricEncoder<'_>,
    labels: &impl EncodeLabelSet,
    value: Option<f64>,
) -> fmt::Result {
    match value {
        Some(value) => out.encode_family(labels)?.encode_gauge(&value),
        None => Ok(()),
    }
}

fn counter(
    out: &mut MetricEncoder<'_>,
    labels: &impl EncodeLabelSet,
    value: Option<u64>,
) -> fmt::Result {
    match value {
        Some(value) => out
            .encode_family(labels)?
            .encode_counter::<NoLabelSet, _, u64>(&value, None),
        None => Ok(()),
    }
}
