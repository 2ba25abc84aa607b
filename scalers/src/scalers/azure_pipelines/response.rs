//! Azure DevOps' answers: the agent pools of a name (`{"count": n, "value": [{"id": ..}]}`,
//! "Pools - Get Agent Pools", <https://learn.microsoft.com/rest/api/azure/devops/distributedtask/pools/get-agent-pools>)
//! and a pool's job requests (`{"count": n, "value": [<job request>]}`), counted as KEDA
//! counts them.

use serde_json::Value;

use super::Matching;

/// The ID of the one pool named `name`.
///
/// # Errors
/// Not the documented JSON, no pool of that name, or several.
pub fn pool_id(body: &[u8], name: &str) -> Result<i64, String> {
    let json: Value =
        crate::remote::from_json(body).map_err(|e| format!("the agent pools answer is {e}"))?;
    let pools = json
        .get("value")
        .and_then(Value::as_array)
        .ok_or_else(|| "the agent pools answer has no \"value\" list".to_string())?;
    match pools.as_slice() {
        [] => Err(format!("agent pool with name `{name}` not found")),
        [pool] => pool
            .get("id")
            .and_then(Value::as_i64)
            .ok_or_else(|| "the agent pool has no integer \"id\"".to_string()),
        more => Err(format!(
            "found {} agent pool with name `{name}`",
            more.len()
        )),
    }
}

/// Whether a job request is still waiting: neither finished (`result`) nor received by an
/// agent (`receiveTime`, Go's zero time counting as absent).
fn waiting(job: &Value) -> bool {
    let finished = job.get("result").is_some_and(|r| !r.is_null());
    let received = job
        .get("receiveTime")
        .and_then(Value::as_str)
        .is_some_and(|t| !t.starts_with("0001-01-01"));
    !finished && !received
}

/// The strings of `job[key]`, an array of strings.
fn strings<'a>(job: &'a Value, key: &str) -> Vec<&'a str> {
    job.get(key)
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

/// KEDA's `getCanAgentDemandFulfilJob`: `Agent.Version*` demands ignored on both sides;
/// every job demand must match one of the trigger's (by default), or additionally every
/// trigger demand one of the job's (`requireAllDemands`), or only every trigger demand must
/// be among the job's (`requireAllDemandsAndIgnoreOthers`).
fn demands_match(
    job: &[&str],
    trigger: &[String],
    require_all: bool,
    require_all_ignore_others: bool,
    case_insensitive: bool,
) -> bool {
    let job: Vec<&str> = job
        .iter()
        .copied()
        .filter(|d| !d.starts_with("Agent.Version"))
        .collect();
    let trigger: Vec<&str> = trigger
        .iter()
        .map(String::as_str)
        .filter(|d| !d.starts_with("Agent.Version"))
        .collect();
    let mut count = 0usize;
    for j in &job {
        for t in &trigger {
            let matched = if case_insensitive {
                j.to_lowercase() == t.to_lowercase()
            } else {
                j == t
            };
            if matched {
                count += 1;
            }
        }
    }
    if require_all {
        count == job.len() && count == trigger.len()
    } else if require_all_ignore_others {
        count == trigger.len()
    } else {
        count == job.len()
    }
}

/// The number of waiting job requests the trigger can run.
///
/// # Errors
/// Not the documented JSON.
pub fn queued_jobs(body: &[u8], matching: &Matching) -> Result<i64, String> {
    let json: Value =
        crate::remote::from_json(body).map_err(|e| format!("the job requests answer is {e}"))?;
    let jobs = json
        .get("value")
        .and_then(Value::as_array)
        .ok_or_else(|| "the job requests answer has no \"value\" list".to_string())?;
    let mut count: i64 = 0;
    for job in jobs.iter().filter(|j| waiting(j)) {
        let runs = match matching {
            Matching::All => true,
            Matching::Demands {
                demands,
                require_all,
                require_all_ignore_others,
                case_insensitive,
            } => demands_match(
                &strings(job, "demands"),
                demands,
                *require_all,
                *require_all_ignore_others,
                *case_insensitive,
            ),
            Matching::Parent(parent) => job
                .get("matchedAgents")
                .and_then(Value::as_array)
                .is_some_and(|agents| {
                    agents
                        .iter()
                        .any(|a| a.get("name").and_then(Value::as_str) == Some(parent))
                }),
        };
        if runs {
            count += 1;
        }
    }
    Ok(count)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn demands(list: &str, require_all: bool, ignore_others: bool, ci: bool) -> Matching {
        Matching::Demands {
            demands: list.split(',').map(str::to_string).collect(),
            require_all,
            require_all_ignore_others: ignore_others,
            case_insensitive: ci,
        }
    }

    const JOBS: &str = r#"{"count":5,"value":[
        {"requestId":1,"demands":["maven","java","Agent.Version -gtVersion 2.182.1"],"matchedAgents":[{"id":1,"name":"parent-a"}]},
        {"requestId":2,"demands":["maven"],"matchedAgents":[{"id":2,"name":"parent-b"}]},
        {"requestId":3,"demands":["maven"],"result":"succeeded","receiveTime":"2026-11-20T10:00:00Z"},
        {"requestId":4,"demands":["maven"],"receiveTime":"2026-11-20T10:00:00Z"},
        {"requestId":5,"demands":["Java"],"receiveTime":"0001-01-01T00:00:00"}
    ]}"#;

    #[test]
    fn waiting_jobs_are_matched_as_keda_matches_them() {
        let rows = [
            (Matching::All, 3),
            (Matching::Parent("parent-a".into()), 1),
            (Matching::Parent("nobody".into()), 0),
            // Every job demand among the trigger's: jobs 1 and 2.
            (demands("maven,java", false, false, false), 2),
            // ... and every trigger demand among the job's: job 1.
            (demands("maven,java", true, false, false), 1),
            // Only the trigger's demands must be there: jobs 1 and 2 have maven.
            (demands("maven", false, true, false), 2),
            (demands("java", false, false, true), 1),
            (demands("java", false, false, false), 0),
        ];
        for (i, (matching, count)) in rows.iter().enumerate() {
            assert_eq!(
                queued_jobs(JOBS.as_bytes(), matching),
                Ok(*count),
                "row {i}"
            );
        }
        assert!(queued_jobs(b"<html/>", &Matching::All).is_err());
    }

    #[test]
    fn a_pool_name_gives_one_id() {
        assert_eq!(
            pool_id(br#"{"count":1,"value":[{"id":7,"name":"p"}]}"#, "p"),
            Ok(7)
        );
        assert_eq!(
            pool_id(br#"{"count":0,"value":[]}"#, "p"),
            Err("agent pool with name `p` not found".into())
        );
        assert_eq!(
            pool_id(br#"{"count":2,"value":[{"id":1},{"id":2}]}"#, "p"),
            Err("found 2 agent pool with name `p`".into())
        );
    }
}
