//! Issue 27's replay bench: a year of 30 s samples (1,051,200) of one trigger, replayed by
//! `keda-rs simulate` for one ScaledObject, must take under 10 s.
//!
//! ```text
//! nice -n 19 cargo bench -p keda-rs --bench simulate_year --profile dev -- [--days 365] [--step 30]
//! ```
//!
//! The history is a daily wave with noise (a fixed pseudo-random sequence, so every run replays
//! the same values) that takes the object from 0 to its maximum and back every day. Timed, in
//! the order the command runs them: parsing the CSV (the baseline: reading the history is the
//! floor of any replay), the replay (the operator's decision every `pollingInterval` and the
//! HPA every 15 s sync), and writing the outputs (the `time,replicas` CSV and the thinned
//! charts). It prints each time, the replay's cost as a multiple of parsing, and the whole
//! run's time against the 10 s budget.

use std::fmt::Write as _;
use std::path::Path;
use std::time::{Duration, Instant};

use keda_rs::hpa::HpaSettings;
use keda_rs::simulate;

const BUDGET: Duration = Duration::from_secs(10);

const OBJECT: &str = "
apiVersion: keda.sh/v1alpha1
kind: ScaledObject
metadata: {name: year, namespace: bench}
spec:
  scaleTargetRef: {name: worker}
  pollingInterval: 30
  cooldownPeriod: 300
  maxReplicaCount: 20
  triggers:
    - type: prometheus
      name: load
      metadata: {serverAddress: 'http://p', query: q, threshold: '50', activationThreshold: '5'}
";

fn arg(name: &str, default: i64) -> i64 {
    let mut it = std::env::args();
    while let Some(a) = it.next() {
        if a == name {
            return it
                .next()
                .and_then(|v| v.parse().ok())
                .filter(|v: &i64| *v > 0)
                .unwrap_or(default);
        }
    }
    default
}

fn main() {
    let days = arg("--days", 365);
    let step = arg("--step", 30);
    let start: jiff::Timestamp = "2025-01-01T00:00:00Z".parse().expect("a time");
    let samples = days * 86_400 / step;
    let mut csv = String::with_capacity(usize::try_from(samples).unwrap_or(0) * 32);
    csv.push_str("time,trigger,value\n");
    let mut seed: u64 = 27;
    for i in 0..samples {
        seed = seed
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        #[allow(clippy::cast_precision_loss, reason = "bench data")]
        let (noise, secs) = (
            (seed >> 40) as f64 / f64::from(1u32 << 24),
            (i * step) as f64,
        );
        let wave = (secs / 86_400.0 * std::f64::consts::TAU).sin();
        let value = (wave * 600.0 + noise * 80.0).max(0.0).round();
        let t = start + jiff::SignedDuration::from_secs(i * step);
        let _ = writeln!(csv, "{t},load,{value}");
    }
    println!(
        "history: {samples} samples ({days} days of {step} s), {} MB of CSV",
        csv.len() / 1_000_000
    );

    let objects = simulate::parse_objects(Path::new("bench.yaml"), OBJECT).expect("the object");
    let object = &objects[0];

    let clock = Instant::now();
    let points = simulate::parse_csv(Path::new("bench.csv"), &csv, object).expect("the CSV");
    let parse = clock.elapsed();

    let clock = Instant::now();
    let timeline = simulate::simulate(object, &points, &HpaSettings::default(), 0);
    let replay = clock.elapsed();

    let out = std::env::temp_dir().join(format!("keda-rs-simulate-bench-{}", std::process::id()));
    let clock = Instant::now();
    let written = simulate::write_outputs(&out, object, &timeline).expect("the outputs");
    let write = clock.elapsed();
    let _ = std::fs::remove_dir_all(&out);

    let total = parse + replay + write;
    let s = &timeline.summary;
    println!(
        "timeline: {} changes ({} up, {} down), {:.0} replica-hours, {} chart samples, {} files",
        timeline.changes.len(),
        s.scale_ups,
        s.scale_downs,
        s.replica_hours,
        timeline.samples.len(),
        written.len()
    );
    println!("parse CSV (baseline): {:>8.3} s", parse.as_secs_f64());
    println!("replay:               {:>8.3} s", replay.as_secs_f64());
    println!("write outputs:        {:>8.3} s", write.as_secs_f64());
    println!("total:                {:>8.3} s", total.as_secs_f64());
    println!(
        "replay / parse: {:.2}x; budget {} s / total: {:.2}x ({})",
        replay.as_secs_f64() / parse.as_secs_f64().max(1e-9),
        BUDGET.as_secs(),
        BUDGET.as_secs_f64() / total.as_secs_f64().max(1e-9),
        if total < BUDGET {
            "within budget"
        } else {
            "OVER BUDGET"
        }
    );
    if total >= BUDGET {
        std::process::exit(1);
    }
}
