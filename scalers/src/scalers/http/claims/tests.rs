use super::*;

fn claim(ns: &str, name: &str, second: i64, routes: &[(&str, &str)]) -> Claim {
    Claim {
        namespace: ns.into(),
        name: name.into(),
        created: Some(Timestamp::from_second(1_700_000_000 + second).unwrap()),
        routes: routes
            .iter()
            .map(|(host, prefix)| Route {
                host: host.to_string(),
                prefix: prefix.to_string(),
                trigger_index: 0,
            })
            .collect(),
    }
}

fn refused(verdicts: &Verdicts) -> Vec<String> {
    let mut out: Vec<String> = verdicts
        .refused()
        .map(|((ns, name), r)| match r {
            Refusal::Conflict {
                owner_namespace,
                owner_name,
                ..
            } => format!("{ns}/{name} by {owner_namespace}/{owner_name}"),
            Refusal::NotAllowed { route, .. } => format!("{ns}/{name} host {}", route.host),
            Refusal::Reserved {
                route,
                owner_namespace,
                ..
            } => format!(
                "{ns}/{name} host {} reserved for {owner_namespace}",
                route.host
            ),
        })
        .collect();
    out.sort();
    out
}

#[test]
fn hosts_and_prefixes_overlap_as_requests_would_match_both() {
    // (a, b, overlap)
    let hosts = [
        ("shop.example.com", "shop.example.com", true),
        ("shop.example.com", "blog.example.com", false),
        ("*", "shop.example.com", true),
        ("*.example.com", "shop.example.com", true),
        ("*.example.com", "a.shop.example.com", true),
        // The wildcard does not cover its own domain.
        ("*.example.com", "example.com", false),
        ("*.example.com", "*.shop.example.com", true),
        ("*.example.com", "*.example.org", false),
        // A suffix that is not a whole label.
        ("*.example.com", "badexample.com", false),
        ("*.shop.example.com", "shop.example.com", false),
    ];
    for (a, b, expected) in hosts {
        assert_eq!(hosts_overlap(a, b), expected, "{a} {b}");
        assert_eq!(hosts_overlap(b, a), expected, "{b} {a}");
    }
    let prefixes = [
        ("/", "/login", true),
        ("/login", "/login", true),
        ("/login", "/login/x", true),
        ("/api/", "/api", true),
        ("/api", "/apix", false),
        ("/api", "/web", false),
    ];
    for (a, b, expected) in prefixes {
        assert_eq!(prefixes_overlap(a, b), expected, "{a} {b}");
        assert_eq!(prefixes_overlap(b, a), expected, "{b} {a}");
    }
}

#[test]
fn the_oldest_claim_wins_across_namespaces() {
    let verdicts = resolve(
        [
            // Created later, but claims a path under the shop's host.
            claim("attacker", "steal", 5, &[("shop.example.com", "/login")]),
            claim("shop", "shop", 1, &[("shop.example.com", "/")]),
            // The same namespace may add routes under its own host.
            claim("shop", "login", 7, &[("shop.example.com", "/login")]),
            // Disjoint host: fine.
            claim("blog", "blog", 3, &[("blog.example.com", "/")]),
            // A wildcard over the shop's host, a catch-all: both overlap.
            claim("wild", "wild", 4, &[("*.example.com", "/static")]),
            claim("any", "any", 6, &[("*", "/")]),
        ],
        &HostPolicy::allow_all(),
    );
    assert_eq!(
        refused(&verdicts),
        [
            "any/any by shop/shop",
            "attacker/steal by shop/shop",
            "wild/wild by shop/shop",
        ]
    );
    let message = verdicts.refusal("attacker", "steal").unwrap().to_string();
    assert!(
        message.contains("route shop.example.com/login overlaps route shop.example.com/ of ScaledObject shop/shop"),
        "{message}"
    );
}

#[test]
fn a_refused_claim_takes_nothing_and_ties_break_by_namespace_then_name() {
    let verdicts = resolve(
        [
            claim("a", "first", 1, &[("x.example.com", "/")]),
            // Refused by a/first; its y.example.com is therefore free.
            claim(
                "b",
                "second",
                2,
                &[("x.example.com", "/"), ("y.example.com", "/")],
            ),
            claim("c", "third", 3, &[("y.example.com", "/")]),
            // Same second: namespace order decides ("d" before "e").
            claim("e", "late", 4, &[("z.example.com", "/")]),
            claim("d", "early", 4, &[("z.example.com", "/")]),
        ],
        &HostPolicy::allow_all(),
    );
    assert_eq!(
        refused(&verdicts),
        ["b/second by a/first", "e/late by d/early"]
    );
}

#[test]
fn the_owners_deletion_hands_the_route_to_the_next_oldest() {
    let owner = claim("shop", "shop", 1, &[("shop.example.com", "/")]);
    let second = claim("other", "second", 2, &[("shop.example.com", "/login")]);
    let third = claim("third", "third", 3, &[("shop.example.com", "/login/x")]);
    let before = resolve(
        [owner, second.clone(), third.clone()],
        &HostPolicy::allow_all(),
    );
    assert_eq!(
        refused(&before),
        ["other/second by shop/shop", "third/third by shop/shop"]
    );
    let after = resolve([second, third], &HostPolicy::allow_all());
    assert_eq!(refused(&after), ["third/third by other/second"]);
    assert_eq!(
        before.changed(&after),
        [
            ("other".to_string(), "second".to_string()),
            ("third".to_string(), "third".to_string())
        ]
    );
}

#[test]
fn the_policy_refuses_hosts_outside_a_namespaces_patterns() {
    let policy = HostPolicy::from_yaml(
        "shop: [shop.example.com, \"*.shop.example.com\"]\n\"*\": [\"*.apps.example.com\"]\nroot: [\"*\"]\n",
    )
    .unwrap();
    // (namespace, host, allowed)
    let cases = [
        ("shop", "shop.example.com", true),
        ("shop", "api.shop.example.com", true),
        ("shop", "*.shop.example.com", true),
        ("shop", "*.eu.shop.example.com", true),
        ("shop", "blog.example.com", false),
        ("shop", "*", false),
        ("shop", "*.example.com", false),
        // Unlisted namespaces get the "*" entry.
        ("team", "team.apps.example.com", true),
        ("team", "shop.example.com", false),
        ("root", "www.example.org", true),
        // The catch-all overlaps the shop's listed hosts, which are the shop's alone.
        ("root", "*", false),
    ];
    for (ns, host, expected) in cases {
        assert_eq!(policy.allows(ns, host), expected, "{ns} {host}");
    }
    let verdicts = resolve(
        [
            claim("team", "web", 1, &[("shop.example.com", "/")]),
            claim("shop", "shop", 2, &[("shop.example.com", "/")]),
        ],
        &policy,
    );
    // The refused claim takes nothing: the shop still gets its host.
    assert_eq!(refused(&verdicts), ["team/web host shop.example.com"]);
    let message = verdicts.refusal("team", "web").unwrap().to_string();
    assert!(
        message.contains("host \"shop.example.com\" is not allowed for namespace \"team\""),
        "{message}"
    );
    // Without a "*" entry an unlisted namespace may claim nothing.
    let strict = HostPolicy::from_yaml("shop: [shop.example.com]").unwrap();
    assert!(!strict.allows("team", "team.example.com"));
    assert!(HostPolicy::allow_all().allows("team", "*"));
}

#[test]
fn a_host_listed_for_a_namespace_is_reserved_against_broader_grants() {
    let policy = HostPolicy::from_yaml(concat!(
        "shop: [shop.apps.example.com, \"*.shop.apps.example.com\"]\n",
        "platform: [\"*.example.com\", shared.example.com]\n",
        "partner: [shared.example.com, \"*.partner.example.com\"]\n",
        "root: [\"*\"]\n",
        "\"*\": [\"*.apps.example.com\"]\n",
    ))
    .unwrap();
    let reserved = |owner: &str, pattern: &str| {
        Err(Denial::Reserved {
            owner_namespace: owner.into(),
            pattern: pattern.into(),
        })
    };
    // (namespace, host, verdict)
    let cases = [
        // Unlisted namespaces share "*.apps.example.com", except what the shop lists.
        ("team", "team.apps.example.com", Ok(())),
        (
            "team",
            "shop.apps.example.com",
            reserved("shop", "shop.apps.example.com"),
        ),
        (
            "team",
            "api.shop.apps.example.com",
            reserved("shop", "*.shop.apps.example.com"),
        ),
        // A wildcard over a listed host overlaps it.
        (
            "team",
            "*.apps.example.com",
            reserved("shop", "*.shop.apps.example.com"),
        ),
        ("shop", "shop.apps.example.com", Ok(())),
        ("shop", "*.shop.apps.example.com", Ok(())),
        // The shop was not given the rest of apps.example.com.
        ("shop", "team.apps.example.com", Err(Denial::NotAllowed)),
        // A broader named grant loses to a narrower one of another namespace...
        (
            "platform",
            "x.partner.example.com",
            reserved("partner", "*.partner.example.com"),
        ),
        ("platform", "www.example.com", Ok(())),
        // ... and to the catch-all of nobody: root's `*` is broader than everything.
        (
            "root",
            "www.example.com",
            reserved("platform", "*.example.com"),
        ),
        ("root", "www.example.org", Ok(())),
        // The same pattern listed for two namespaces is shared by them.
        ("platform", "shared.example.com", Ok(())),
        ("partner", "shared.example.com", Ok(())),
        // The partner's narrower grant beats the platform's wildcard.
        ("partner", "x.partner.example.com", Ok(())),
    ];
    for (ns, host, expected) in cases {
        assert_eq!(policy.check(ns, host), expected, "{ns} {host}");
    }
    // Through "*", even the same pattern as a listed one is not enough.
    let same =
        HostPolicy::from_yaml("shop: [\"*.apps.example.com\"]\n\"*\": [\"*.apps.example.com\"]")
            .unwrap();
    assert_eq!(
        same.check("team", "a.apps.example.com"),
        reserved("shop", "*.apps.example.com")
    );
}

#[test]
fn a_reserved_host_stays_its_namespaces_through_delete_and_recreate() {
    let policy =
        HostPolicy::from_yaml("shop: [shop.apps.example.com]\n\"*\": [\"*.apps.example.com\"]")
            .unwrap();
    let squatter = claim(
        "attacker",
        "steal",
        5,
        &[("shop.apps.example.com", "/login")],
    );
    let owner = claim("shop", "shop", 1, &[("shop.apps.example.com", "/")]);
    let recreated = claim("shop", "shop", 9, &[("shop.apps.example.com", "/")]);
    let expected = ["attacker/steal host shop.apps.example.com reserved for shop"];
    for claims in [
        vec![owner, squatter.clone()],
        // The window between delete and recreate: the squatter is still refused.
        vec![squatter.clone()],
        vec![recreated, squatter],
    ] {
        assert_eq!(refused(&resolve(claims, &policy)), expected);
    }
    let verdicts = resolve(
        [claim(
            "attacker",
            "steal",
            5,
            &[("shop.apps.example.com", "/login")],
        )],
        &policy,
    );
    let message = verdicts.refusal("attacker", "steal").unwrap().to_string();
    assert!(
        message.contains(
            "host \"shop.apps.example.com\" is reserved for namespace \"shop\" by the \
             activator's host policy (its entry lists \"shop.apps.example.com\""
        ),
        "{message}"
    );
}

/// The table of docs/http.md, "Host policy".
#[test]
fn the_documented_example_decides_as_docs_http_md_says() {
    let policy = HostPolicy::from_yaml(concat!(
        "shop: [shop.example.com, \"*.shop.example.com\"]\n",
        "blog: [blog.example.com]\n",
        "\"*\": [\"*.apps.example.com\"]\n",
        "platform: [\"*.example.com\"]\n",
        "root: [\"*\"]\n",
    ))
    .unwrap();
    let reason = |ns: &str, host: &str| match policy.check(ns, host) {
        Ok(()) => "allowed",
        Err(Denial::NotAllowed) => REASON_HOST_NOT_ALLOWED,
        Err(Denial::Reserved { .. }) => REASON_HOST_RESERVED,
    };
    assert_eq!(reason("shop", "api.shop.example.com"), "allowed");
    assert_eq!(reason("team", "team.apps.example.com"), "allowed");
    assert_eq!(reason("team", "shop.example.com"), "HTTPHostNotAllowed");
    assert_eq!(reason("team", "*.apps.example.com"), "allowed");
    assert_eq!(
        reason("platform", "api.shop.example.com"),
        "HTTPHostReserved"
    );
    assert_eq!(reason("root", "*"), "HTTPHostReserved");
}

#[test]
fn an_empty_policy_allows_nothing() {
    for text in ["{}", "", "# no host is granted yet\n"] {
        let policy = HostPolicy::from_yaml(text).unwrap();
        assert_eq!(policy, HostPolicy::deny_all(), "{text:?}");
        assert_eq!(
            policy.check("shop", "shop.example.com"),
            Err(Denial::NotAllowed)
        );
        assert!(!policy.allows("shop", "*"));
    }
}

#[test]
fn a_bad_policy_names_the_entry() {
    let err = HostPolicy::from_yaml("shop: [\"shop example\"]")
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("\"shop\"") && err.contains("shop example"),
        "{err}"
    );
    assert!(HostPolicy::from_yaml("shop: 3").is_err());
}
