//! An [`Explanation`] as `kubectl describe` prints objects: aligned `Key: value` lines, one
//! indented block per trigger. Pure: the text depends only on the document.

use std::fmt::Write as _;

use super::{Explanation, TriggerState, human_duration, number};

const WIDTH: usize = 20;

fn line(out: &mut String, indent: usize, key: &str, value: &str) {
    let pad = WIDTH.saturating_sub(indent + key.len() + 1);
    let _ = writeln!(out, "{:indent$}{key}:{:pad$} {value}", "", "");
}

fn ago(e: &Explanation, at: jiff::Timestamp) -> String {
    format!("{} ago", human_duration(e.now.duration_since(at).as_secs()))
}

/// The text `keda-rs explain` prints.
pub fn text(e: &Explanation) -> String {
    let mut out = String::new();
    line(&mut out, 0, "Name", &e.name);
    line(&mut out, 0, "Namespace", &e.namespace);
    line(&mut out, 0, "Kind", &e.kind);
    line(&mut out, 0, "Target", &e.target);
    line(&mut out, 0, "State", e.state.as_str());
    line(&mut out, 0, "Why", &e.reason);
    let r = &e.replicas;
    line(
        &mut out,
        0,
        "Replicas",
        &format!(
            "current {}, min {}, max {}, idle {}",
            r.current.map_or_else(|| "?".to_string(), |c| c.to_string()),
            r.min,
            r.max,
            r.idle.map_or_else(|| "-".to_string(), |c| c.to_string())
        ),
    );
    if let Some(w) = &r.last_scale {
        let result = w
            .error
            .as_ref()
            .map_or_else(String::new, |err| format!(", failed: {err}"));
        line(
            &mut out,
            0,
            "Last scale",
            &format!("{} -> {} ({}{result})", w.from, w.to, w.kind),
        );
    }
    line(
        &mut out,
        0,
        "Last poll",
        &format!(
            "{} (pollingInterval {})",
            e.polled_at
                .map_or_else(|| "never".to_string(), |at| ago(e, at)),
            human_duration(i64::from(e.polling_interval_seconds))
        ),
    );
    if let Some(shard) = &e.shard {
        line(
            &mut out,
            0,
            "Shard",
            &format!(
                "owned by {} ({} of {} live replicas answered{})",
                shard.owner.as_deref().unwrap_or("no live replica"),
                shard.answered_by,
                shard.members,
                if shard.owned_here {
                    ""
                } else {
                    "; it no longer owns the object"
                }
            ),
        );
    }
    line(&mut out, 0, "Pause", &pause(e));
    let c = &e.cooldown;
    let mut cooldown = format!(
        "cooldownPeriod {}, initialCooldownPeriod {}, last active {}",
        human_duration(c.period_seconds),
        human_duration(c.initial_period_seconds),
        c.last_active_time
            .map_or_else(|| "never".to_string(), |at| ago(e, at))
    );
    if let Some(left) = c.remaining_seconds {
        let _ = write!(cooldown, ", {} left", human_duration(left));
    }
    line(&mut out, 0, "Cooldown", &cooldown);
    let fallback = match &e.fallback {
        None => "<none>".to_string(),
        Some(f) => format!(
            "failureThreshold {}, replicas {}, behavior {}: {}",
            f.failure_threshold,
            f.replicas,
            f.behavior,
            if !f.valid {
                "invalid, never applies"
            } else if f.active {
                "in force"
            } else {
                "not in force"
            }
        ),
    };
    line(&mut out, 0, "Fallback", &fallback);
    if let Some(m) = &e.scaling_modifiers {
        line(
            &mut out,
            0,
            "Scaling modifiers",
            &format!(
                "{} = {}, target {} ({}), activationTarget {}",
                m.formula,
                m.value.map_or_else(|| "<none>".to_string(), number),
                m.target,
                m.metric_type,
                m.activation_target.as_deref().unwrap_or("0")
            ),
        );
    }
    let _ = writeln!(out, "Triggers:");
    for t in &e.triggers {
        trigger(&mut out, t);
    }
    line(
        &mut out,
        0,
        "HPA",
        &format!(
            "min {}, max {}: {}",
            e.hpa.min_replicas, e.hpa.max_replicas, e.hpa.summary
        ),
    );
    out
}

fn pause(e: &Explanation) -> String {
    let p = &e.pause;
    let mut parts = Vec::new();
    if let Some(error) = &p.error {
        parts.push(error.clone());
    }
    match p.paused_replicas {
        Some(n) => parts.push(format!("paused-replicas={n}")),
        None if p.paused => parts.push("paused".to_string()),
        None => {}
    }
    if p.paused_scale_in {
        parts.push("paused-scale-in".to_string());
    }
    if p.paused_scale_out {
        parts.push("paused-scale-out".to_string());
    }
    if p.force_activation {
        parts.push("force-activation".to_string());
    }
    if parts.is_empty() {
        "<none>".to_string()
    } else {
        parts.join(", ")
    }
}

fn trigger(out: &mut String, t: &TriggerState) {
    let name = if t.name.is_empty() {
        String::new()
    } else {
        format!(" {:?}", t.name)
    };
    let _ = writeln!(out, "  {} {}{name}:", t.index, t.trigger_type);
    let Some(metric) = &t.metric else {
        line(
            out,
            4,
            "Metric",
            "<none>: a Resource metric the HPA reads from the pods",
        );
        return;
    };
    line(out, 4, "Metric", metric);
    let value = match (t.value, t.in_fallback) {
        (Some(v), true) => format!("{} (fallback)", number(v)),
        (Some(v), false) => number(v),
        (None, _) => "<none>".to_string(),
    };
    line(out, 4, "Value", &value);
    line(
        out,
        4,
        "Target",
        &format!(
            "{} ({})",
            t.target.map_or_else(|| "?".to_string(), number),
            t.target_type.as_deref().unwrap_or("?")
        ),
    );
    let activation = match &t.activation.parameter {
        Some(p) => format!("{} ({p})", t.activation.value),
        None => format!("{} (default)", t.activation.value),
    };
    line(out, 4, "Activation", &activation);
    line(out, 4, "Active", if t.active { "yes" } else { "no" });
    line(out, 4, "Failures", &t.failures.to_string());
    line(
        out,
        4,
        "Last error",
        t.last_error.as_deref().unwrap_or("<none>"),
    );
    line(out, 4, "HPA", t.hpa_formula.as_deref().unwrap_or("<none>"));
}
