//! Which GpuNodeProfile governs a node: exactly one, none, or a conflict.

use std::collections::BTreeMap;

use gpuready_api::GpuNodeProfile;
use kube_core::{ResourceExt, Selector, SelectorExt};

/// The outcome of matching a node's labels against every profile's selector.
#[derive(Debug)]
pub enum Governance<'a> {
    /// No profile selects the node.
    Ungoverned,
    Governed(&'a GpuNodeProfile),
    /// Several profiles select the node; gpuready leaves it as it is.
    Conflict(Vec<String>),
}

/// A profile whose selector cannot be parsed (an unknown operator, say).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("GpuNodeProfile {profile}: spec.nodeSelector: {message}")]
pub struct SelectorError {
    pub profile: String,
    pub message: String,
}

/// A parsed selector per profile, built once per profile generation.
pub fn profile_selector(profile: &GpuNodeProfile) -> Result<Selector, SelectorError> {
    Selector::try_from(profile.spec.node_selector.clone()).map_err(|e| SelectorError {
        profile: profile.name_any(),
        message: e.to_string(),
    })
}

/// Matches a node against profiles (with their parsed selectors). Profiles being
/// deleted are not considered: their nodes are released.
pub fn govern<'a>(
    labels: &BTreeMap<String, String>,
    profiles: &[(&'a GpuNodeProfile, &Selector)],
) -> Governance<'a> {
    let matched: Vec<&GpuNodeProfile> = profiles
        .iter()
        .filter(|(p, _)| p.metadata.deletion_timestamp.is_none())
        .filter(|(_, sel)| sel.matches(labels))
        .map(|(p, _)| *p)
        .collect();
    match matched.as_slice() {
        [] => Governance::Ungoverned,
        [one] => Governance::Governed(one),
        many => {
            let mut names: Vec<String> = many.iter().map(|p| p.name_any()).collect();
            names.sort();
            Governance::Conflict(names)
        }
    }
}

/// One requirement on one label key, as a selector states it.
enum Requirement<'a> {
    In(Vec<&'a str>),
    NotIn(Vec<&'a str>),
    Exists,
    DoesNotExist,
}

fn requirements(
    s: &k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector,
) -> BTreeMap<&str, Vec<Requirement<'_>>> {
    let mut out: BTreeMap<&str, Vec<Requirement<'_>>> = BTreeMap::new();
    for (k, v) in s.match_labels.iter().flatten() {
        out.entry(k.as_str())
            .or_default()
            .push(Requirement::In(vec![v.as_str()]));
    }
    for e in s.match_expressions.iter().flatten() {
        let values = || e.values.iter().flatten().map(String::as_str).collect();
        let r = match e.operator.as_str() {
            "In" => Requirement::In(values()),
            "NotIn" => Requirement::NotIn(values()),
            "Exists" => Requirement::Exists,
            "DoesNotExist" => Requirement::DoesNotExist,
            // An unknown operator selects nothing; not a proof of anything.
            _ => continue,
        };
        out.entry(e.key.as_str()).or_default().push(r);
    }
    out
}

/// Whether two profiles can never select the same node, whatever its labels:
/// on some key their requirements contradict (`pool=a` and `pool=b`, `In [a]`
/// and `NotIn [a]`, `Exists` and `DoesNotExist`). `false` means they may meet,
/// not that they do.
pub fn provably_disjoint(a: &GpuNodeProfile, b: &GpuNodeProfile) -> bool {
    let (ra, rb) = (
        requirements(&a.spec.node_selector),
        requirements(&b.spec.node_selector),
    );
    let contradict = |x: &Requirement<'_>, y: &Requirement<'_>| match (x, y) {
        (Requirement::In(p), Requirement::In(q)) => !p.iter().any(|v| q.contains(v)),
        (Requirement::In(p), Requirement::NotIn(q))
        | (Requirement::NotIn(q), Requirement::In(p)) => p.iter().all(|v| q.contains(v)),
        (Requirement::In(_) | Requirement::Exists, Requirement::DoesNotExist)
        | (Requirement::DoesNotExist, Requirement::In(_) | Requirement::Exists) => true,
        _ => false,
    };
    ra.iter().any(|(k, xs)| {
        rb.get(k)
            .is_some_and(|ys| xs.iter().any(|x| ys.iter().any(|y| contradict(x, y))))
    })
}
