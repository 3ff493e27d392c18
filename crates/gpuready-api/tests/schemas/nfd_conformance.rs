//! The generated NFD CRDs must define exactly the API of the upstream NFD CRD file
//! they claim to reproduce, and the release fingerprint must name every upstream
//! CRD set correctly.
//!
//! Upstream files come from `gpuready_testenv::upstream_nfd`: the releases the Go
//! module proxy serves are fetched and cached (a failure to fetch fails the
//! test: a conformance test that skips proves nothing); older releases run only
//! when `GPUREADY_EXTRA_NFD_CRDS` names a folder holding them, and say so otherwise.
//!
//! Comparison is by API, not bytes: see `gpuready_api::nfd::compare` for the
//! normalizations (descriptions dropped, sets sorted, server defaults ≡ absent).

use gpuready_api::crd;
use gpuready_api::nfd::compare::{Difference, diff, normalize_crd};
use gpuready_api::nfd::{
    NFD_CRD_RELEASE_ANNOTATION, NODE_FEATURE_CRD, NODE_FEATURE_GROUP_CRD, NODE_FEATURE_RULE_CRD,
    NfdCrdRelease, UPSTREAM_REFERENCE,
};
use gpuready_testenv::upstream_nfd;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use serde_json::{Value, json};

/// Every upstream file and the release it must be recognised as. A file in the
/// release listed for the tests that is missing here fails `every_upstream_release_is_listed`.
const UPSTREAM: &[(&str, NfdCrdRelease)] = &[
    ("v0.14.6", NfdCrdRelease::V0_14),
    ("v0.15.7", NfdCrdRelease::V0_15),
    ("v0.16.9", NfdCrdRelease::V0_16_17),
    ("v0.17.4", NfdCrdRelease::V0_16_17),
    ("v0.18.3", NfdCrdRelease::V0_18_19),
    ("v0.19.0", NfdCrdRelease::V0_18_19),
];

/// The documents of an upstream file, as untyped JSON (so that nothing is lost
/// to a typed parse before comparing); `None` for a release this run cannot
/// read (see `gpuready_testenv::upstream_nfd`, which says so).
fn upstream_docs(tag: &str) -> Option<Vec<Value>> {
    upstream_nfd::docs(tag).expect("upstream NFD CRDs")
}

fn upstream_typed(tag: &str) -> Option<Vec<CustomResourceDefinition>> {
    upstream_nfd::crds(tag).expect("upstream NFD CRDs")
}

/// The reference release is one the Go module proxy serves: always there.
fn reference_docs() -> Vec<Value> {
    upstream_docs(UPSTREAM_REFERENCE).expect("the reference release is fetched, never skipped")
}

fn generated_docs() -> Vec<Value> {
    crd::nfd_crds()
        .iter()
        .map(|c| serde_json::to_value(c).expect("serialize generated CRD"))
        .collect()
}

fn name_of(doc: &Value) -> &str {
    doc.pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("<unnamed>")
}

fn find<'a>(docs: &'a [Value], name: &str) -> Option<&'a Value> {
    docs.iter().find(|d| name_of(d) == name)
}

fn render(diffs: &[Difference]) -> String {
    diffs
        .iter()
        .map(|d| format!("  {}", d.render("upstream", "generated")))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn generated_crds_reproduce_upstream_reference() {
    let upstream = reference_docs();
    let generated = generated_docs();
    let mut report = Vec::new();

    for gen_doc in &generated {
        if find(&upstream, name_of(gen_doc)).is_none() {
            report.push(format!(
                "{}: generated, but not in upstream",
                name_of(gen_doc)
            ));
        }
    }
    for up in &upstream {
        let name = name_of(up);
        let Some(gen_doc) = find(&generated, name) else {
            report.push(format!("{name}: in upstream, but not generated"));
            continue;
        };
        let mut lines = Vec::new();
        // The headline properties first, in plain words; the full diff below
        // covers them again along with every schema field.
        for pointer in [
            "/spec/group",
            "/spec/scope",
            "/spec/names/kind",
            "/spec/names/plural",
            "/spec/names/shortNames",
        ] {
            let (u, g) = (up.pointer(pointer), gen_doc.pointer(pointer));
            if u != g {
                lines.push(format!(
                    "  {pointer}: upstream has {u:?}, generated has {g:?}"
                ));
            }
        }
        let (u, g) = (versions_summary(up), versions_summary(gen_doc));
        if u != g {
            lines.push(format!(
                "  versions (name, served, storage, subresources): upstream has {u}, generated has {g}"
            ));
        }
        let diffs = diff(&normalize_crd(up), &normalize_crd(gen_doc));
        if !diffs.is_empty() {
            lines.push(render(&diffs));
        }
        if !lines.is_empty() {
            report.push(format!("{name}:\n{}", lines.join("\n")));
        }
    }
    assert!(
        report.is_empty(),
        "generated NFD CRDs differ from upstream NFD {UPSTREAM_REFERENCE} \
         (descriptions ignored):\n{}",
        report.join("\n")
    );
}

fn versions_summary(doc: &Value) -> String {
    let versions: Vec<Value> = doc
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|v| {
            json!([
                v.get("name"),
                v.get("served"),
                v.get("storage"),
                v.get("subresources")
            ])
        })
        .collect();
    Value::Array(versions).to_string()
}

#[test]
fn generated_crds_carry_their_release() {
    for crd in crd::nfd_crds() {
        let name = crd.metadata.name.clone().unwrap_or_default();
        let value = crd
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(NFD_CRD_RELEASE_ANNOTATION))
            .unwrap_or_else(|| panic!("{name}: no {NFD_CRD_RELEASE_ANNOTATION} annotation"));
        assert_eq!(
            NfdCrdRelease::parse(value),
            Some(NfdCrdRelease::CARRIED),
            "{name}"
        );
    }
    assert_eq!(
        NfdCrdRelease::fingerprint(&crd::nfd_crds()),
        Some(NfdCrdRelease::CARRIED),
        "the generated set's schema must fingerprint as the release it is annotated with"
    );
}

/// The diff must see real differences; otherwise the test above proves nothing.
#[test]
fn comparison_reports_mutations_by_path() {
    let upstream = reference_docs();
    let up = find(&upstream, NODE_FEATURE_RULE_CRD).expect("NodeFeatureRule in upstream file");
    let mut mutated = up.clone();
    let root = "/spec/versions/0/schema/openAPIV3Schema/properties/spec/properties/rules/items";
    let op_enum = mutated
        .pointer_mut(&format!(
            "{root}/properties/matchFeatures/items/properties/matchName/properties/op/enum"
        ))
        .and_then(Value::as_array_mut)
        .expect("op enum");
    op_enum.retain(|v| v != "Ge");
    *mutated
        .pointer_mut(&format!("{root}/required"))
        .expect("rule required") = json!([]);
    mutated
        .pointer_mut(&format!("{root}/properties"))
        .and_then(Value::as_object_mut)
        .expect("rule properties")
        .insert("priority".into(), json!({"type": "integer"}));

    let lines: Vec<String> = diff(&normalize_crd(up), &normalize_crd(&mutated))
        .iter()
        .map(|d| d.render("upstream", "generated"))
        .collect();
    let schema =
        "spec.versions[v1alpha1].schema.openAPIV3Schema.properties.spec.properties.rules.items";
    let expected_prefixes = [
        format!(
            "{schema}.properties.matchFeatures.items.properties.matchName.properties.op.enum: upstream has ["
        ),
        format!(
            "{schema}.properties.priority: upstream has nothing, generated has {{\"type\":\"integer\"}}"
        ),
        format!("{schema}.required: upstream has [\"name\"], generated has nothing"),
    ];
    assert_eq!(lines.len(), 3, "{lines:#?}");
    for (line, prefix) in lines.iter().zip(&expected_prefixes) {
        assert!(
            line.starts_with(prefix.as_str()),
            "{line}\n  expected to start with\n{prefix}"
        );
    }
    assert!(lines[0].ends_with("(only upstream: [Ge])"), "{}", lines[0]);
}

/// The classifier in gpuready-core sees typed CRDs from the API; the typed form
/// must keep every field the upstream files use.
#[test]
fn typed_parse_keeps_every_field() {
    for (tag, _) in UPSTREAM {
        let Some(raw) = upstream_docs(tag) else {
            continue;
        };
        let typed = upstream_typed(tag).expect("read a moment ago");
        for (raw, typed) in raw.iter().zip(&typed) {
            let typed = serde_json::to_value(typed).expect("serialize");
            let diffs = diff(&normalize_crd(raw), &normalize_crd(&typed));
            assert!(
                diffs.is_empty(),
                "{tag} {}: typed round trip lost something:\n{}",
                name_of(raw),
                render(&diffs)
            );
        }
    }
}

#[test]
fn every_upstream_release_is_listed() {
    let mut listed: Vec<&str> = UPSTREAM.iter().map(|(t, _)| *t).collect();
    listed.sort();
    let mut known = upstream_nfd::all_releases();
    known.sort();
    assert_eq!(
        known, listed,
        "update UPSTREAM in this test to tests/control-plane/nfd-crds.versions and \
         gpuready_testenv::upstream_nfd::EXTRA_RELEASES"
    );
    // Every file of the extra folder, when there is one, is a listed release.
    if let Some(dir) = upstream_nfd::extra_dir() {
        for entry in std::fs::read_dir(&dir).expect("read the extra NFD CRD folder") {
            let name = entry.expect("entry").file_name();
            let Some(tag) = name.to_str().and_then(|n| n.strip_suffix(".yaml")) else {
                continue;
            };
            assert!(
                listed.contains(&tag),
                "{}: {tag} is not listed",
                dir.display()
            );
        }
    }
    assert!(
        upstream_nfd::proxy_releases().contains(&UPSTREAM_REFERENCE),
        "UPSTREAM_REFERENCE {UPSTREAM_REFERENCE} must be a release the Go module proxy serves"
    );
}

#[test]
fn fingerprint_names_every_upstream_release() {
    for (tag, expected) in UPSTREAM {
        let Some(crds) = upstream_typed(tag) else {
            continue;
        };
        let got = NfdCrdRelease::fingerprint(&crds);
        assert_eq!(got, Some(*expected), "NFD {tag} recognised as {got:?}");

        let names: Vec<&str> = crds
            .iter()
            .filter_map(|c| c.metadata.name.as_deref())
            .collect();
        assert!(names.contains(&NODE_FEATURE_CRD) && names.contains(&NODE_FEATURE_RULE_CRD));
        assert_eq!(
            names.contains(&NODE_FEATURE_GROUP_CRD),
            *expected >= NfdCrdRelease::V0_16_17,
            "NFD {tag}: NodeFeatureGroup presence"
        );

        // gpuready upgrades older sets and must never see an upstream set as newer
        // than its own (that would make it leave stale CRDs in place).
        assert!(
            *expected <= NfdCrdRelease::CARRIED,
            "NFD {tag} is newer than the carried set"
        );
        if *tag == UPSTREAM_REFERENCE {
            assert_eq!(
                *expected,
                NfdCrdRelease::CARRIED,
                "reference file is the carried release"
            );
        }
    }
    let older: Vec<&str> = UPSTREAM
        .iter()
        .filter(|(_, r)| *r < NfdCrdRelease::CARRIED)
        .map(|(t, _)| *t)
        .collect();
    assert_eq!(older, ["v0.14.6", "v0.15.7", "v0.16.9", "v0.17.4"]);
}

#[test]
fn fingerprint_of_partial_sets() {
    let v18 = upstream_typed("v0.18.3").expect("a release the Go module proxy serves");
    let without = |name: &str| -> Vec<CustomResourceDefinition> {
        v18.iter()
            .filter(|c| c.metadata.name.as_deref() != Some(name))
            .cloned()
            .collect()
    };
    // A v0.18 rule CRD still tells its release when the group CRD was deleted.
    assert_eq!(
        NfdCrdRelease::fingerprint(&without(NODE_FEATURE_GROUP_CRD)),
        Some(NfdCrdRelease::V0_18_19)
    );
    // Only NodeFeature (the same in every release): no verdict.
    let only_nf: Vec<CustomResourceDefinition> = v18
        .iter()
        .filter(|c| c.metadata.name.as_deref() == Some(NODE_FEATURE_CRD))
        .cloned()
        .collect();
    assert_eq!(NfdCrdRelease::fingerprint(&only_nf), None);
    assert_eq!(NfdCrdRelease::fingerprint(&[]), None);
}
